# llrdma configure checks: one macro per dependency.  An explicitly requested
# dependency that cannot be met is a hard error with a one-line fix.

# AX_REQUIRE_CXX17: the core is C++17; fail early with a clear message.
AC_DEFUN([AX_REQUIRE_CXX17], [
  AC_LANG_PUSH([C++])
  llrdma_save_CXXFLAGS=$CXXFLAGS
  CXXFLAGS="$CXXFLAGS -std=c++17"
  AC_MSG_CHECKING([whether $CXX accepts -std=c++17])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <optional>
#include <string_view>]], [[std::optional<std::string_view> v; return v.has_value();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([a C++17 compiler is required; install g++ (apt-get install g++)])])
  CXXFLAGS=$llrdma_save_CXXFLAGS
  AC_LANG_POP([C++])
])

# LLRDMA_FIND_OMPI: Open MPI 4.1 or 5.0 with devel headers.
AC_DEFUN([LLRDMA_FIND_OMPI], [
  LLRDMA_MPICC=
  LLRDMA_OMPI_HOW=
  AS_CASE(["$with_ompi"],
    [no], [AC_MSG_ERROR([llrdma is an Open MPI plug-in: --without-ompi is not possible])],
    [""|yes], [
      AC_PATH_PROG([LLRDMA_MPICC], [mpicc])
      AS_IF([test -n "$LLRDMA_MPICC"], [LLRDMA_OMPI_HOW="mpicc wrapper $LLRDMA_MPICC"])],
    [
      AS_IF([test -x "$with_ompi/bin/mpicc"], [LLRDMA_MPICC="$with_ompi/bin/mpicc"],
        [AC_MSG_ERROR([--with-ompi=$with_ompi: no $with_ompi/bin/mpicc; give the Open MPI prefix that holds bin/mpicc])])
      LLRDMA_OMPI_HOW="--with-ompi=$with_ompi"])

  AS_IF([test -n "$LLRDMA_MPICC"], [
      llrdma_ompi_incdirs=`$LLRDMA_MPICC --showme:incdirs 2>/dev/null`
      llrdma_ompi_libdirs=`$LLRDMA_MPICC --showme:libdirs 2>/dev/null`
      llrdma_ompi_bindir=`AS_DIRNAME(["$LLRDMA_MPICC"])`
      AS_IF([test -z "$llrdma_ompi_incdirs"],
        [AC_MSG_ERROR([$LLRDMA_MPICC is not Open MPI's wrapper (no --showme:incdirs); use --with-ompi=DIR])])
    ], [
      PKG_CHECK_EXISTS([ompi], [
          LLRDMA_OMPI_HOW="pkg-config ompi"
          llrdma_ompi_incdirs=`$PKG_CONFIG --cflags-only-I ompi | $SED 's/-I//g'`
          llrdma_ompi_libdirs=`$PKG_CONFIG --variable=libdir ompi`
          llrdma_ompi_bindir=`$PKG_CONFIG --variable=prefix ompi`/bin
        ], [AC_MSG_ERROR([Open MPI not found (no mpicc in PATH, no pkg-config ompi); apt-get install libopenmpi-dev openmpi-bin, or --with-ompi=DIR])])
    ])

  OMPI_CPPFLAGS=
  for d in $llrdma_ompi_incdirs; do OMPI_CPPFLAGS="$OMPI_CPPFLAGS -I$d"; done
  OMPI_LDFLAGS=
  for d in $llrdma_ompi_libdirs; do
    OMPI_LDFLAGS="$OMPI_LDFLAGS -L$d"
    AS_IF([test "x$enable_rpath" != xno], [OMPI_LDFLAGS="$OMPI_LDFLAGS -Wl,-rpath,$d"])
  done
  AC_SUBST([OMPI_CPPFLAGS])
  AC_SUBST([OMPI_LDFLAGS])

  llrdma_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $OMPI_CPPFLAGS"
  AC_CHECK_HEADER([opal_config.h], [],
    [AC_MSG_ERROR([Open MPI devel headers missing (opal_config.h); apt-get install libopenmpi-dev, or build Open MPI with --with-devel-headers])])
  AC_MSG_CHECKING([for Open MPI 4.1.x or 5.0.x])
  AC_COMPUTE_INT([llrdma_ompi_major], [OMPI_MAJOR_VERSION], [#include <mpi.h>], [llrdma_ompi_major=0])
  AC_COMPUTE_INT([llrdma_ompi_minor], [OMPI_MINOR_VERSION], [#include <mpi.h>], [llrdma_ompi_minor=0])
  AC_COMPUTE_INT([llrdma_ompi_release], [OMPI_RELEASE_VERSION], [#include <mpi.h>], [llrdma_ompi_release=0])
  LLRDMA_OMPI_VERSION="$llrdma_ompi_major.$llrdma_ompi_minor.$llrdma_ompi_release"
  AC_MSG_RESULT([$LLRDMA_OMPI_VERSION])
  # The component ABIs differ between series (BTL 3.1.0 vs 3.3.0, coll 2.0.0
  # vs 2.4.0; common/llrdma_ompi_compat.h): one build per series.
  AS_CASE(["$llrdma_ompi_major.$llrdma_ompi_minor"],
    [4.1|5.0], [],
    [AC_MSG_ERROR([Open MPI $LLRDMA_OMPI_VERSION found, llrdma supports the 4.1 and 5.0 series; point --with-ompi at such an install])])
  CPPFLAGS=$llrdma_save_CPPFLAGS
  AC_SUBST([LLRDMA_OMPI_VERSION])
  LLRDMA_OMPI_SERIES="$llrdma_ompi_major.$llrdma_ompi_minor"
  AC_SUBST([LLRDMA_OMPI_SERIES])
  AC_DEFINE_UNQUOTED([LLRDMA_OMPI_MAJOR], [$llrdma_ompi_major],
    [major version of the Open MPI series built against (4 or 5)])
  AM_CONDITIONAL([OMPI5], [test "$llrdma_ompi_major" = 5])

  # 5.0 components call PMIx themselves (the opal/mca/pmix framework is
  # gone): its headers and library, from pkg-config.
  OPAL_LIBS=-lopen-pal
  AS_IF([test "$llrdma_ompi_major" = 5], [
    PKG_CHECK_MODULES([PMIX], [pmix], [],
      [AC_MSG_ERROR([Open MPI 5 needs PMIx's headers for its components (pkg-config pmix failed); apt-get install libpmix-dev, or set PKG_CONFIG_PATH])])
    OMPI_CPPFLAGS="$OMPI_CPPFLAGS $PMIX_CFLAGS"
    OPAL_LIBS="$OPAL_LIBS $PMIX_LIBS"])
  AC_SUBST([OPAL_LIBS])

  # Some distributions' devel headers leave out the headers of the built-in
  # thread and timer components (Debian 13's libopenmpi-dev 5.0.7 lacks
  # opal/mca/threads/pthreads/ and opal/mca/timer/linux/): say so here
  # rather than in the middle of the build.
  CPPFLAGS="$CPPFLAGS $OMPI_CPPFLAGS"
  AS_IF([test "$llrdma_ompi_major" = 5],
    [llrdma_mutex_h=opal/mca/threads/mutex.h], [llrdma_mutex_h=opal/threads/mutex.h])
  AC_MSG_CHECKING([whether Open MPI's devel headers are complete ($llrdma_mutex_h)])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include "opal_config.h"
#include "$llrdma_mutex_h"]], [[opal_mutex_t m; (void)m;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([Open MPI's devel headers are incomplete: $llrdma_mutex_h does not compile (see config.log; Debian 13's libopenmpi-dev lacks opal/mca/threads/pthreads/*.h and opal/mca/timer/linux/*.h: README.md, "Open MPI 5", says how to add them)])])
  CPPFLAGS=$llrdma_save_CPPFLAGS

  AC_PATH_PROG([MPIRUN], [mpirun], [], [$llrdma_ompi_bindir$PATH_SEPARATOR$PATH])
  AC_PATH_PROG([OMPI_INFO], [ompi_info], [], [$llrdma_ompi_bindir$PATH_SEPARATOR$PATH])
  AS_IF([test -z "$MPIRUN" || test -z "$OMPI_INFO"],
    [AC_MSG_ERROR([mpirun/ompi_info not found next to Open MPI; apt-get install openmpi-bin])])
  AS_IF([test -z "$LLRDMA_MPICC"], [LLRDMA_MPICC=`AS_DIRNAME(["$MPIRUN"])`/mpicc])
  AC_SUBST([LLRDMA_MPICC])

  # Where the MCA components are installed.
  AS_CASE(["$with_ompi_component_dir"],
    [""|yes|no], [LLRDMA_COMPONENT_DIR='${libdir}/openmpi'],
    [ompi], [
      LLRDMA_COMPONENT_DIR=`$OMPI_INFO --path pkglibdir --parsable 2>/dev/null | $SED -n 's/^path:pkglibdir://p'`
      AS_IF([test -z "$LLRDMA_COMPONENT_DIR"],
        [LLRDMA_COMPONENT_DIR=`$OMPI_INFO --path pkglibdir 2>/dev/null | $SED -n 's/^ *Pkglibdir: *//p'`])
      AS_IF([test -z "$LLRDMA_COMPONENT_DIR"],
        [AC_MSG_ERROR([--with-ompi-component-dir=ompi: could not ask $OMPI_INFO for its pkglibdir; give the directory instead])])],
    [LLRDMA_COMPONENT_DIR=$with_ompi_component_dir])
  AC_SUBST([LLRDMA_COMPONENT_DIR])
])

# LLRDMA_FIND_VERBS: rdma-core's libibverbs and librdmacm, for btl/llrdma.
# Default: build the BTL when found, otherwise warn and build the rest (coll,
# library, tools); --with-verbs[=DIR] makes it mandatory.
AC_DEFUN([LLRDMA_FIND_VERBS], [
  VERBS_CPPFLAGS=
  VERBS_LDFLAGS=
  llrdma_have_verbs=yes
  AS_CASE(["$with_verbs"],
    [no], [llrdma_have_verbs=no],
    [""|yes], [],
    [AS_IF([test -f "$with_verbs/include/infiniband/verbs.h"], [],
       [AC_MSG_ERROR([--with-verbs=$with_verbs: no $with_verbs/include/infiniband/verbs.h; give the rdma-core prefix])])
     VERBS_CPPFLAGS="-I$with_verbs/include"
     VERBS_LDFLAGS="-L$with_verbs/lib -L$with_verbs/lib64"])
  llrdma_save_CPPFLAGS=$CPPFLAGS
  llrdma_save_LDFLAGS=$LDFLAGS
  CPPFLAGS="$CPPFLAGS $VERBS_CPPFLAGS"
  LDFLAGS="$LDFLAGS $VERBS_LDFLAGS"
  llrdma_verbs_fix="apt-get install libibverbs-dev librdmacm-dev, or --with-verbs=DIR"
  llrdma_verbs_missing=
  AS_IF([test $llrdma_have_verbs = yes], [
    AC_CHECK_HEADER([infiniband/verbs.h], [], [llrdma_verbs_missing="infiniband/verbs.h"])
    AC_CHECK_HEADER([rdma/rdma_cma.h], [], [llrdma_verbs_missing="$llrdma_verbs_missing rdma/rdma_cma.h"])
    AC_CHECK_LIB([ibverbs], [ibv_open_device], [:], [llrdma_verbs_missing="$llrdma_verbs_missing libibverbs"])
    AC_CHECK_LIB([rdmacm], [rdma_create_id], [:], [llrdma_verbs_missing="$llrdma_verbs_missing librdmacm"])
    AC_CHECK_DECLS([ibv_reg_dmabuf_mr], [], [], [[#include <infiniband/verbs.h>]])
    # rdma-core's work-request API (ibv_wr_*, rdma_create_qp_ex) for sendi's
    # inline post; without it every post is ibv_post_send.  A flag, not the
    # config header: btl_llrdma_post.h is included after Open MPI's headers.
    AC_CHECK_DECLS([ibv_wr_send, rdma_create_qp_ex], [], [],
      [[#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>]])
    AS_IF([test "x$ac_cv_have_decl_ibv_wr_send" = xyes && test "x$ac_cv_have_decl_rdma_create_qp_ex" = xyes],
      [VERBS_CPPFLAGS="$VERBS_CPPFLAGS -DLLRDMA_HAVE_WR_API=1"])
    # rdma-core 35+: tells whether the kernel copies registered pages on fork()
    # (then ibv_fork_init is unneeded); older rdma-core: btl/llrdma calls ibv_fork_init.
    AC_CHECK_DECLS([ibv_is_fork_initialized], [], [], [[#include <infiniband/verbs.h>]])
  ])
  CPPFLAGS=$llrdma_save_CPPFLAGS
  LDFLAGS=$llrdma_save_LDFLAGS
  AS_IF([test -n "$llrdma_verbs_missing"], [
    AS_IF([test -n "$with_verbs"],
      [AC_MSG_ERROR([--with-verbs: rdma-core incomplete (missing$llrdma_verbs_missing); $llrdma_verbs_fix])])
    AC_MSG_WARN([rdma-core incomplete (missing$llrdma_verbs_missing): btl/llrdma will NOT be built ($llrdma_verbs_fix)])
    llrdma_have_verbs=no])
  VERBS_LIBS="-libverbs -lrdmacm"
  AC_SUBST([VERBS_CPPFLAGS])
  AC_SUBST([VERBS_LDFLAGS])
  AC_SUBST([VERBS_LIBS])
  AM_CONDITIONAL([BUILD_BTL], [test $llrdma_have_verbs = yes])
])

# LLRDMA_FIND_BOOST_TEST: unit tests only.
AC_DEFUN([LLRDMA_FIND_BOOST_TEST], [
  llrdma_have_boost_test=no
  BOOST_TEST_CPPFLAGS=
  BOOST_TEST_LDFLAGS=
  AS_IF([test "$with_boost_test" != no], [
    AS_CASE(["$with_boost_test"], [""|yes], [],
      [AS_IF([test -f "$with_boost_test/include/boost/test/unit_test.hpp"], [],
         [AC_MSG_ERROR([--with-boost-test=$with_boost_test: no $with_boost_test/include/boost/test/unit_test.hpp; give the Boost prefix or apt-get install libboost-test-dev])])
       BOOST_TEST_CPPFLAGS="-I$with_boost_test/include"; BOOST_TEST_LDFLAGS="-L$with_boost_test/lib"])
    AC_LANG_PUSH([C++])
    llrdma_save_CPPFLAGS=$CPPFLAGS
    llrdma_save_LIBS=$LIBS
    llrdma_save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS $BOOST_TEST_CPPFLAGS -DBOOST_TEST_DYN_LINK"
    LDFLAGS="$LDFLAGS $BOOST_TEST_LDFLAGS"
    LIBS="-lboost_unit_test_framework $LIBS"
    AC_MSG_CHECKING([for Boost.Test (shared library)])
    AC_LINK_IFELSE([AC_LANG_SOURCE([[#define BOOST_TEST_MODULE conftest
#include <boost/test/unit_test.hpp>
BOOST_AUTO_TEST_CASE(t) { BOOST_TEST(1 == 1); }]])],
      [llrdma_have_boost_test=yes], [llrdma_have_boost_test=no])
    AC_MSG_RESULT([$llrdma_have_boost_test])
    CPPFLAGS=$llrdma_save_CPPFLAGS
    LIBS=$llrdma_save_LIBS
    LDFLAGS=$llrdma_save_LDFLAGS
    AC_LANG_POP([C++])
    AS_IF([test "$llrdma_have_boost_test" = no && test -n "$with_boost_test"],
      [AC_MSG_ERROR([--with-boost-test given but Boost.Test cannot be used; apt-get install libboost-test-dev])])
    AS_IF([test "$llrdma_have_boost_test" = no],
      [AC_MSG_WARN([Boost.Test not found: unit tests will be skipped (apt-get install libboost-test-dev)])])
  ])
  AC_SUBST([BOOST_TEST_CPPFLAGS])
  AC_SUBST([BOOST_TEST_LDFLAGS])
  AM_CONDITIONAL([HAVE_BOOST_TEST], [test "$llrdma_have_boost_test" = yes])
])

# LLRDMA_FIND_CUDA: optional; GPU buffers in coll/llrdma.
AC_DEFUN([LLRDMA_FIND_CUDA], [
  llrdma_have_cuda=no
  LLRDMA_CUDA_DIR=
  AS_CASE(["$with_cuda"],
    [no], [],
    [""], [AS_IF([test -d /usr/local/cuda], [LLRDMA_CUDA_DIR=/usr/local/cuda])],
    [yes], [LLRDMA_CUDA_DIR=/usr/local/cuda],
    [LLRDMA_CUDA_DIR=$with_cuda])
  AS_IF([test -n "$LLRDMA_CUDA_DIR"], [
    llrdma_save_CPPFLAGS=$CPPFLAGS
    llrdma_save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS -I$LLRDMA_CUDA_DIR/include"
    LDFLAGS="$LDFLAGS -L$LLRDMA_CUDA_DIR/lib64"
    llrdma_cuda_ok=yes
    AC_CHECK_HEADER([cuda_runtime_api.h], [], [llrdma_cuda_ok=no])
    AS_IF([test $llrdma_cuda_ok = yes], [AC_CHECK_LIB([cudart], [cudaMalloc], [:], [llrdma_cuda_ok=no])])
    AC_PATH_PROG([NVCC], [nvcc], [], [$LLRDMA_CUDA_DIR/bin])
    AS_IF([test -z "$NVCC"], [llrdma_cuda_ok=no])
    CPPFLAGS=$llrdma_save_CPPFLAGS
    LDFLAGS=$llrdma_save_LDFLAGS
    AS_IF([test $llrdma_cuda_ok = yes], [llrdma_have_cuda=yes],
      [AS_IF([test -n "$with_cuda"],
         [AC_MSG_ERROR([--with-cuda=$with_cuda: CUDA Toolkit unusable there (need include/cuda_runtime_api.h, lib64/libcudart, bin/nvcc); install it or use --without-cuda])])
       AC_MSG_WARN([$LLRDMA_CUDA_DIR has no usable CUDA Toolkit: building without GPU support])
       LLRDMA_CUDA_DIR=])
  ])
  AS_IF([test $llrdma_have_cuda = yes], [AC_DEFINE([LLRDMA_HAVE_CUDA], [1], [CUDA Toolkit found])])
  CUDA_CPPFLAGS="-I$LLRDMA_CUDA_DIR/include"
  CUDA_LDFLAGS="-L$LLRDMA_CUDA_DIR/lib64"
  CUDA_NVCC_RPATH=
  AS_IF([test "x$enable_rpath" != xno], [
    CUDA_LDFLAGS="$CUDA_LDFLAGS -Wl,-rpath,$LLRDMA_CUDA_DIR/lib64"
    CUDA_NVCC_RPATH="-Xlinker -rpath -Xlinker $LLRDMA_CUDA_DIR/lib64"])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_NVCC_RPATH])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([LLRDMA_CUDA_DIR])
  AM_CONDITIONAL([HAVE_CUDA], [test $llrdma_have_cuda = yes])
])
