# NVRTC and the CUDA headers (nvrtc.h, cuda.h): from a CUDA toolkit, else from the project-local
# prefix that scripts/setup.sh fills from the PyPI wheels (docs/install.md). Either way it
# defines what the rest of the build uses:
#   CUDA::nvrtc               imported target (libnvrtc)
#   CUDAToolkit_INCLUDE_DIRS  the folder holding nvrtc.h and cuda.h
#   CUDAToolkit_LIBRARY_DIR, CUDAToolkit_VERSION(_MAJOR/_MINOR)
#   ROPEJIT_CUDA_ORIGIN       "toolkit" or "prefix"
# Nothing here needs nvcc, and nothing is downloaded at configure time.
#
# Cache variables:
#   ROPEJIT_CUDA_SOURCE  AUTO (toolkit if found, else prefix) | TOOLKIT | PREFIX
#   ROPEJIT_CUDA_PREFIX  the prefix (default: $ENV{ROPEJIT_CUDA_PREFIX}, else <source>/.deps/cuda)
# A toolkit location given explicitly (CUDAToolkit_ROOT, as a CMake or environment variable, or
# the CUDA_HOME environment variable that scripts/setup.sh also reads) is the only one looked at:
# if it holds no include/nvrtc.h the toolkit counts as absent, even if another one is installed.
include_guard(GLOBAL)

# The default of a project-local prefix: environment variable `env`, else <source>/.deps/<sub>.
function(ropejit_default_prefix out env sub)
  if(DEFINED ENV{${env}} AND NOT "$ENV{${env}}" STREQUAL "")
    set(${out} "$ENV{${env}}" PARENT_SCOPE)
  else()
    set(${out} "${PROJECT_SOURCE_DIR}/.deps/${sub}" PARENT_SCOPE)
  endif()
endfunction()

ropejit_default_prefix(_ropejit_default_prefix ROPEJIT_CUDA_PREFIX cuda)
set(ROPEJIT_CUDA_PREFIX "${_ropejit_default_prefix}" CACHE PATH
    "Prefix holding NVRTC + CUDA headers from the PyPI wheels (scripts/setup.sh), used without a CUDA toolkit")
set(ROPEJIT_CUDA_SOURCE "AUTO" CACHE STRING
    "Where NVRTC and the CUDA headers come from: AUTO (toolkit, else ROPEJIT_CUDA_PREFIX), TOOLKIT or PREFIX")
set_property(CACHE ROPEJIT_CUDA_SOURCE PROPERTY STRINGS AUTO TOOLKIT PREFIX)
string(TOUPPER "${ROPEJIT_CUDA_SOURCE}" _ropejit_cuda_source)
if(NOT _ropejit_cuda_source MATCHES "^(AUTO|TOOLKIT|PREFIX)$")
  message(FATAL_ERROR "ROPEJIT_CUDA_SOURCE=${ROPEJIT_CUDA_SOURCE}: must be AUTO, TOOLKIT or PREFIX")
endif()

# CUDA_VERSION from cuda.h (e.g. 13000 -> 13.0).
function(_ropejit_cuda_header_version include_dir out_var)
  set(version "")
  if(EXISTS "${include_dir}/cuda.h")
    file(STRINGS "${include_dir}/cuda.h" line REGEX "^#define[ \t]+CUDA_VERSION[ \t]+[0-9]+" LIMIT_COUNT 1)
    if(line MATCHES "CUDA_VERSION[ \t]+([0-9]+)")
      math(EXPR major "${CMAKE_MATCH_1} / 1000")
      math(EXPR minor "(${CMAKE_MATCH_1} % 1000) / 10")
      set(version "${major}.${minor}")
    endif()
  endif()
  set(${out_var} "${version}" PARENT_SCOPE)
endfunction()

# --- 1. a CUDA toolkit ---
set(ROPEJIT_CUDA_ORIGIN "")
set(_ropejit_no_toolkit_why "")
if(NOT _ropejit_cuda_source STREQUAL "PREFIX")
  set(_ropejit_root "")
  if(DEFINED CUDAToolkit_ROOT AND NOT "${CUDAToolkit_ROOT}" STREQUAL "")
    set(_ropejit_root "${CUDAToolkit_ROOT}")
    set(_ropejit_root_from "CUDAToolkit_ROOT")
  elseif(DEFINED ENV{CUDAToolkit_ROOT} AND NOT "$ENV{CUDAToolkit_ROOT}" STREQUAL "")
    set(_ropejit_root "$ENV{CUDAToolkit_ROOT}")
    set(_ropejit_root_from "environment CUDAToolkit_ROOT")
  elseif(DEFINED ENV{CUDA_HOME} AND NOT "$ENV{CUDA_HOME}" STREQUAL "")
    set(_ropejit_root "$ENV{CUDA_HOME}")
    set(_ropejit_root_from "environment CUDA_HOME")
    set(CUDAToolkit_ROOT "$ENV{CUDA_HOME}")  # FindCUDAToolkit then looks there first
  endif()

  if(_ropejit_root AND NOT EXISTS "${_ropejit_root}/include/nvrtc.h")
    set(_ropejit_no_toolkit_why "no include/nvrtc.h in ${_ropejit_root} (${_ropejit_root_from})")
  else()
    find_package(CUDAToolkit QUIET)
    if(NOT CUDAToolkit_FOUND)
      set(_ropejit_no_toolkit_why "FindCUDAToolkit found no toolkit (no nvcc on PATH or in /usr/local/cuda)")
    elseif(NOT TARGET CUDA::nvrtc)
      set(_ropejit_no_toolkit_why "the toolkit at ${CUDAToolkit_BIN_DIR}/.. has no libnvrtc")
    else()
      list(GET CUDAToolkit_INCLUDE_DIRS 0 _ropejit_inc)
      if(NOT EXISTS "${_ropejit_inc}/nvrtc.h" OR NOT EXISTS "${_ropejit_inc}/cuda.h")
        set(_ropejit_no_toolkit_why "the toolkit's ${_ropejit_inc} lacks nvrtc.h or cuda.h")
      else()
        set(ROPEJIT_CUDA_ORIGIN "toolkit")
        get_target_property(_ropejit_nvrtc CUDA::nvrtc IMPORTED_LOCATION)
        message(STATUS "ropejit CUDA: toolkit ${CUDAToolkit_VERSION} "
                       "(nvrtc: ${_ropejit_nvrtc}; headers: ${_ropejit_inc})")
      endif()
    endif()
  endif()

  if(NOT ROPEJIT_CUDA_ORIGIN AND _ropejit_cuda_source STREQUAL "TOOLKIT")
    message(FATAL_ERROR "ROPEJIT_CUDA_SOURCE=TOOLKIT but no usable CUDA toolkit: ${_ropejit_no_toolkit_why}. "
                        "Set CUDAToolkit_ROOT or CUDA_HOME, or use ROPEJIT_CUDA_SOURCE=AUTO/PREFIX.")
  endif()
else()
  set(_ropejit_no_toolkit_why "ROPEJIT_CUDA_SOURCE=PREFIX")
endif()

# --- 2. the project-local prefix (PyPI wheels: nvidia-cuda-nvrtc, -runtime, -cccl, -crt) ---
if(NOT ROPEJIT_CUDA_ORIGIN)
  set(_ropejit_prefix "${ROPEJIT_CUDA_PREFIX}")
  set(_ropejit_fix "Run scripts/setup.sh (with no toolkit it installs them there from PyPI), "
                   "or install a CUDA toolkit and set CUDA_HOME / CUDAToolkit_ROOT. See docs/install.md.")
  # <prefix>/include + <prefix>/lib as scripts/setup.sh links them; also the raw wheel layout
  # of `pip install --target <prefix>` (nvidia/cu13/...).
  set(_ropejit_inc "")
  foreach(sub include nvidia/cu13/include nvidia/cu12/include)
    if(EXISTS "${_ropejit_prefix}/${sub}/nvrtc.h")
      set(_ropejit_inc "${_ropejit_prefix}/${sub}")
      break()
    endif()
  endforeach()
  if(NOT _ropejit_inc)
    message(FATAL_ERROR "ropejit CUDA: no CUDA toolkit (${_ropejit_no_toolkit_why}) and no nvrtc.h "
                        "under ROPEJIT_CUDA_PREFIX=${_ropejit_prefix} (looked in include/ and "
                        "nvidia/cu13/include/). ${_ropejit_fix}")
  endif()
  if(NOT EXISTS "${_ropejit_inc}/cuda.h")
    message(FATAL_ERROR "ropejit CUDA: ${_ropejit_inc} has nvrtc.h but no cuda.h "
                        "(wheel nvidia-cuda-runtime). ${_ropejit_fix}")
  endif()
  # The library: libnvrtc.so if present, else the versioned name the wheel ships (libnvrtc.so.13).
  string(REGEX REPLACE "/include$" "/lib" _ropejit_libdir "${_ropejit_inc}")
  set(_ropejit_nvrtc "")
  if(EXISTS "${_ropejit_libdir}/libnvrtc.so")
    set(_ropejit_nvrtc "${_ropejit_libdir}/libnvrtc.so")
  else()
    file(GLOB _ropejit_candidates "${_ropejit_libdir}/libnvrtc.so.[0-9]*")
    list(SORT _ropejit_candidates)  # shortest (libnvrtc.so.13) before libnvrtc.so.13.0.88
    if(_ropejit_candidates)
      list(GET _ropejit_candidates 0 _ropejit_nvrtc)
    endif()
  endif()
  file(GLOB _ropejit_builtins "${_ropejit_libdir}/libnvrtc-builtins.so*")
  if(NOT _ropejit_nvrtc OR NOT _ropejit_builtins)
    message(FATAL_ERROR "ropejit CUDA: ${_ropejit_libdir} lacks libnvrtc.so* or libnvrtc-builtins.so* "
                        "(wheel nvidia-cuda-nvrtc). ${_ropejit_fix}")
  endif()

  _ropejit_cuda_header_version("${_ropejit_inc}" CUDAToolkit_VERSION)
  if(CUDAToolkit_VERSION MATCHES "^([0-9]+)\\.([0-9]+)$")
    set(CUDAToolkit_VERSION_MAJOR "${CMAKE_MATCH_1}")
    set(CUDAToolkit_VERSION_MINOR "${CMAKE_MATCH_2}")
    if(CUDAToolkit_VERSION_MAJOR LESS 12)
      message(WARNING "ropejit CUDA: the prefix holds CUDA ${CUDAToolkit_VERSION}; ropejit needs 12.x or 13.x")
    endif()
  endif()
  set(CUDAToolkit_INCLUDE_DIRS "${_ropejit_inc}")
  set(CUDAToolkit_LIBRARY_DIR "${_ropejit_libdir}")

  if(NOT TARGET CUDA::nvrtc)
    add_library(CUDA::nvrtc SHARED IMPORTED)
    set_target_properties(CUDA::nvrtc PROPERTIES
      IMPORTED_LOCATION "${_ropejit_nvrtc}"
      INTERFACE_INCLUDE_DIRECTORIES "${_ropejit_inc}"
      # libnvrtc dlopen()s libnvrtc-builtins.so by bare name, and nothing puts this folder on the
      # loader path (a toolkit install adds /etc/ld.so.conf.d). DT_RPATH, unlike the default
      # DT_RUNPATH, also serves libraries loaded by the one that carries it, so whatever links
      # libnvrtc gets the folder as RPATH and the builtins are found from the build tree.
      INTERFACE_LINK_OPTIONS "LINKER:--disable-new-dtags")
  endif()
  set(ROPEJIT_CUDA_ORIGIN "prefix")
  message(STATUS "ropejit CUDA: prefix ${_ropejit_prefix}, CUDA ${CUDAToolkit_VERSION} "
                 "(nvrtc: ${_ropejit_nvrtc}; headers: ${_ropejit_inc}); no toolkit: ${_ropejit_no_toolkit_why}")
endif()

unset(_ropejit_default_prefix)
unset(_ropejit_cuda_source)
unset(_ropejit_root)
unset(_ropejit_inc)
unset(_ropejit_nvrtc)

# nvdisasm / cuobjdump for the static kernel report (optional).
include(RopejitCudaTools)
