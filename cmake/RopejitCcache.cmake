# A compiler cache where one is installed (Debian's ccache, scripts/setup.sh): the standalone
# copy, the Python package's build and a second CI run reuse objects. Paths are hashed relative
# to the source tree, so a copy of it elsewhere hits the same entries; the cache lives in
# ccache's own folder (~/.cache/ccache, or $CCACHE_DIR), never in the clone.
# -DROPEJIT_CCACHE=OFF (or a launcher of your own) builds without it.
option(ROPEJIT_CCACHE "Compile through ccache when it is installed" ON)
if(ROPEJIT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(ROPEJIT_CCACHE_PROGRAM ccache)
  if(ROPEJIT_CCACHE_PROGRAM)
    set(ROPEJIT_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
        ${ROPEJIT_CCACHE_PROGRAM})
    set(CMAKE_C_COMPILER_LAUNCHER ${ROPEJIT_LAUNCHER})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${ROPEJIT_LAUNCHER})
  endif()
endif()
