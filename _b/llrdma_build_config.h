/* llrdma_build_config.h.  Generated from llrdma_build_config.h.in by configure.  */
/* llrdma_build_config.h.in.  Generated from configure.ac by autoheader.  */

/* Define to 1 if you have the declaration of `ibv_is_fork_initialized', and
   to 0 if you don't. */
#define HAVE_DECL_IBV_IS_FORK_INITIALIZED 1

/* Define to 1 if you have the declaration of `ibv_reg_dmabuf_mr', and to 0 if
   you don't. */
#define HAVE_DECL_IBV_REG_DMABUF_MR 1

/* Define to 1 if you have the <dlfcn.h> header file. */
#define HAVE_DLFCN_H 1

/* Define to 1 if you have the <inttypes.h> header file. */
#define HAVE_INTTYPES_H 1

/* Define to 1 if you have the <stdint.h> header file. */
#define HAVE_STDINT_H 1

/* Define to 1 if you have the <stdio.h> header file. */
#define HAVE_STDIO_H 1

/* Define to 1 if you have the <stdlib.h> header file. */
#define HAVE_STDLIB_H 1

/* Define to 1 if you have the <strings.h> header file. */
#define HAVE_STRINGS_H 1

/* Define to 1 if you have the <string.h> header file. */
#define HAVE_STRING_H 1

/* Define to 1 if you have the <sys/stat.h> header file. */
#define HAVE_SYS_STAT_H 1

/* Define to 1 if you have the <sys/types.h> header file. */
#define HAVE_SYS_TYPES_H 1

/* Define to 1 if you have the <unistd.h> header file. */
#define HAVE_UNISTD_H 1

/* CUDA Toolkit found */
#define LLRDMA_HAVE_CUDA 1

/* Define to the sub-directory where libtool stores uninstalled libraries. */
#define LT_OBJDIR ".libs/"

/* Name of package */
#define PACKAGE "llrdma"

/* Define to the address where bug reports for this package should be sent. */
#define PACKAGE_BUGREPORT ""

/* Define to the full name of this package. */
#define PACKAGE_NAME "llrdma"

/* Define to the full name and version of this package. */
#define PACKAGE_STRING "llrdma 0.1.0"

/* Define to the one symbol short name of this package. */
#define PACKAGE_TARNAME "llrdma"

/* Define to the home page for this package. */
#define PACKAGE_URL ""

/* Define to the version of this package. */
#define PACKAGE_VERSION "0.1.0"

/* Define to 1 if all of the C90 standard headers exist (not just the ones
   required in a freestanding environment). This macro is provided for
   backward compatibility; new code need not use it. */
#define STDC_HEADERS 1

/* Version number of package */
#define VERSION "0.1.0"
