# Finds libxxhash (Debian libxxhash-dev ships only pkg-config data) as xxHash::xxhash.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_XXHASH QUIET libxxhash)
endif()
find_path(xxHash_INCLUDE_DIR xxhash.h HINTS ${PC_XXHASH_INCLUDE_DIRS})
find_library(xxHash_LIBRARY NAMES xxhash HINTS ${PC_XXHASH_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(xxHash REQUIRED_VARS xxHash_LIBRARY xxHash_INCLUDE_DIR)
if(xxHash_FOUND AND NOT TARGET xxHash::xxhash)
  add_library(xxHash::xxhash UNKNOWN IMPORTED)
  set_target_properties(xxHash::xxhash PROPERTIES
    IMPORTED_LOCATION "${xxHash_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${xxHash_INCLUDE_DIR}")
endif()
