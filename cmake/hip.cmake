# hipcc, with its platform and clang named (kernels/gpu includes this).
#
# hipcc guesses its platform when HIP_PLATFORM is unset: AMD only if an unversioned clang++
# runs, else NVIDIA when nvcc is on PATH, where it becomes an nvcc wrapper that rejects `-x hip`.
# Every hipcc command of the build therefore runs as KD_HIPCC_COMMAND, which sets
# HIP_PLATFORM=amd, HIP_COMPILER=clang and HIP_CLANG_PATH, so a machine with nvcc and hipcc side
# by side builds both.
#
#   KD_HIPCC            the hipcc program (cache; -DKD_HIPCC=/opt/rocm/bin/hipcc for ROCm 6)
#   KD_HIP_CLANG_PATH   the folder of the clang hipcc runs (cache): a ROCm tree's llvm/bin when
#                       hipcc sits in one, else the folder of clang++-15, which Debian's hipcc
#                       (ROCm 5.2) runs by that name
#   KD_HIPCC_COMMAND    the command line prefix (a list) to run hipcc with; empty without one
find_program(KD_HIPCC hipcc)
if(NOT KD_HIPCC)
  set(KD_HIPCC_COMMAND "")
  return()
endif()

if(NOT KD_HIP_CLANG_PATH)
  get_filename_component(kd_hipcc_real "${KD_HIPCC}" REALPATH)
  get_filename_component(kd_hipcc_dir "${kd_hipcc_real}" DIRECTORY)
  if(EXISTS "${kd_hipcc_dir}/../llvm/bin/clang++")
    get_filename_component(kd_clang_dir "${kd_hipcc_dir}/../llvm/bin" ABSOLUTE)
  else()
    find_program(KD_HIP_CLANGXX clang++-15)
    if(KD_HIP_CLANGXX)
      get_filename_component(kd_clang_dir "${KD_HIP_CLANGXX}" DIRECTORY)
    endif()
  endif()
  set(KD_HIP_CLANG_PATH "${kd_clang_dir}" CACHE PATH "The folder of the clang that hipcc runs")
endif()
if(NOT KD_HIP_CLANG_PATH)
  message(STATUS "kerneld: hipcc found, but not its clang (set KD_HIP_CLANG_PATH); no HIP build")
  set(KD_HIPCC_COMMAND "")
  return()
endif()
set(KD_HIPCC_COMMAND
    ${CMAKE_COMMAND} -E env HIP_PLATFORM=amd HIP_COMPILER=clang
    HIP_CLANG_PATH=${KD_HIP_CLANG_PATH} ${KD_HIPCC})
message(STATUS "kerneld: hipcc ${KD_HIPCC} on the AMD platform with the clang of "
               "${KD_HIP_CLANG_PATH}")
