# Build-time CUDA pieces: nvcc to compile kernel images, cuda.h for driver types.
# Nothing here is linked: libfmha opens libcuda.so.1 at run time.
find_program(FMHA_NVCC nvcc
  HINTS ENV CUDACXX ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
  PATH_SUFFIXES bin REQUIRED)
get_filename_component(_fmha_cuda_bin "${FMHA_NVCC}" DIRECTORY)
get_filename_component(_fmha_cuda_root "${_fmha_cuda_bin}" DIRECTORY)
find_path(FMHA_CUDA_INCLUDE_DIR cuda.h
  HINTS "${_fmha_cuda_root}/include" "${_fmha_cuda_root}/targets/x86_64-linux/include"
  REQUIRED)
message(STATUS "libfmha: nvcc ${FMHA_NVCC}, cuda.h in ${FMHA_CUDA_INCLUDE_DIR}")
