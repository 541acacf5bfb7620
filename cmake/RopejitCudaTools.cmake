# The SASS disassembler for the static kernel report (compile/src/disasm.cpp). At run time the
# report looks in $ROPEJIT_NVDISASM, PATH and $CUDA_HOME/bin; this bakes in one more place found
# now: the project-local prefix scripts/setup.sh fills from the PyPI wheels nvidia-cuda-nvdisasm
# and nvidia-cuda-cuobjdump when the toolkit lacks them, or the configured toolkit's bin/.
#   ROPEJIT_CUDA_TOOLS_PREFIX  that prefix (default: $ENV{ROPEJIT_CUDA_TOOLS_PREFIX}, else
#                              <source>/.deps/cuda-tools)
#   ROPEJIT_NVDISASM_CONFIGURED  the tool found (NOTFOUND: the report falls back to PTX)
include_guard(GLOBAL)

ropejit_default_prefix(_ropejit_tools_default ROPEJIT_CUDA_TOOLS_PREFIX cuda-tools)  # RopejitCuda.cmake
set(ROPEJIT_CUDA_TOOLS_PREFIX "${_ropejit_tools_default}" CACHE PATH
    "Prefix holding nvdisasm/cuobjdump from the PyPI wheels (scripts/setup.sh)")
# Only these places: PATH and $CUDA_HOME are searched at run time, where they may differ.
find_program(ROPEJIT_NVDISASM_CONFIGURED NAMES nvdisasm cuobjdump
  HINTS "${ROPEJIT_CUDA_TOOLS_PREFIX}/bin" "${ROPEJIT_CUDA_TOOLS_PREFIX}/pip/nvidia/cu13/bin" ${CUDAToolkit_BIN_DIR}
  NO_DEFAULT_PATH)
if(ROPEJIT_NVDISASM_CONFIGURED)
  message(STATUS "ropejit SASS disassembler: ${ROPEJIT_NVDISASM_CONFIGURED}")
  set_source_files_properties("${PROJECT_SOURCE_DIR}/compile/src/disasm.cpp" PROPERTIES
    COMPILE_DEFINITIONS "ROPEJIT_NVDISASM_CONFIGURED=\"${ROPEJIT_NVDISASM_CONFIGURED}\"")
else()
  message(STATUS "ropejit SASS disassembler: none at configure time (PATH and $CUDA_HOME/bin are "
                 "searched at run time; else the static report reads the PTX)")
endif()
unset(_ropejit_tools_default)
