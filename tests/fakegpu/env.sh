# shellcheck shell=bash disable=SC2034  # T, P, FAKE are for the tests that source this
# Sourced after tests/mpi/env.sh by the tests that run the fake GPU
# (tests/fakegpu/test-fakegpu.sh, tests/softroce/test-hier-gpu.sh):
# libfakegpu.so as libcuda.so.1 (a symlink in the test's private lib
# folder) and as libllrdma_cuda.so (LLRDMA_CUDA_LIB); the test program.
T="$top_builddir/tests/fakegpu/t_allreduce_fakegpu"
P=t_allreduce_fakegpu
FAKE="$top_builddir/tests/fakegpu/.libs/libfakegpu.so"
mkdir -p "$LLRDMA_TEST_HOME/lib"
ln -sf "$FAKE" "$LLRDMA_TEST_HOME/lib/libcuda.so.1"
export LD_LIBRARY_PATH="$LLRDMA_TEST_HOME/lib:$LD_LIBRARY_PATH"
export LLRDMA_CUDA_LIB="$FAKE"
