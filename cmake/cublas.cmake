# cuBLASLt for the CUDA build (kernels/cuda includes this after find_package(CUDAToolkit)).
#
# The daemon needs only cublasLt.h: it opens libcublasLt with dlopen at run time
# (kernels/cuda/gemm/cublaslt.cc). The tile GEMM's test and benchmark link the library as their
# peer. Both come from the CUDA toolkit where it has them (a full toolkit), else from
# KD_CUBLAS_ROOT: a folder holding include/cublasLt.h and lib/libcublasLt.so*, by default the
# nvidia-cublas wheel that scripts/install-deps.sh puts into .deps/nvidia-cublas/nvidia/cu13
# (a toolkit assembled from NVIDIA's pip wheels has no cuBLAS).
#
# Defines:
#   kd_cublaslt_headers  INTERFACE target carrying the include directory (always, or the CUDA
#                        backend is not built: KD_CUBLAS_FOUND FALSE)
#   kd_cublaslt          the library, where one was found (tests and benchmarks only)
set(KD_CUBLAS_ROOT "${KD_ROOT}/.deps/nvidia-cublas/nvidia/cu13" CACHE PATH
    "A cuBLAS tree (include/, lib/) used when the CUDA toolkit has no cuBLAS")

set(KD_CUBLAS_FOUND FALSE)
find_path(KD_CUBLASLT_INCLUDE_DIR cublasLt.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} "${KD_CUBLAS_ROOT}/include" NO_DEFAULT_PATH)
if(NOT KD_CUBLASLT_INCLUDE_DIR)
  return()
endif()
set(KD_CUBLAS_FOUND TRUE)

# The library beside the header: the toolkit's, or the wheel's, which ships only versioned
# names (libcublasLt.so.13), so those are named too.
get_filename_component(kd_cublas_tree "${KD_CUBLASLT_INCLUDE_DIR}" DIRECTORY)
if(TARGET CUDA::cublasLt AND KD_CUBLASLT_INCLUDE_DIR IN_LIST CUDAToolkit_INCLUDE_DIRS)
  get_target_property(KD_CUBLASLT_LIBRARY CUDA::cublasLt IMPORTED_LOCATION)
else()
  find_library(KD_CUBLASLT_LIBRARY
               NAMES cublasLt libcublasLt.so.13 libcublasLt.so.12
               HINTS "${kd_cublas_tree}/lib" "${kd_cublas_tree}/lib64" NO_DEFAULT_PATH)
endif()

add_library(kd_cublaslt_headers INTERFACE)
target_include_directories(kd_cublaslt_headers INTERFACE ${KD_CUBLASLT_INCLUDE_DIR})
if(KD_CUBLASLT_LIBRARY)
  add_library(kd_cublaslt SHARED IMPORTED GLOBAL)
  set_target_properties(kd_cublaslt PROPERTIES IMPORTED_LOCATION "${KD_CUBLASLT_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${KD_CUBLASLT_INCLUDE_DIR}")
endif()
message(STATUS "kerneld: cuBLASLt header ${KD_CUBLASLT_INCLUDE_DIR}/cublasLt.h, library "
               "${KD_CUBLASLT_LIBRARY} (the daemon opens it at run time: KERNELD_CUBLASLT)")
