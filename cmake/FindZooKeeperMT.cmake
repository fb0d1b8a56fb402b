# Finds the multi-threaded ZooKeeper C client (Debian: libzookeeper-mt-dev), which ships
# neither a CMake config nor a pkg-config file.
#
# Defines ZooKeeperMT_FOUND and the imported target ZooKeeperMT::ZooKeeperMT. Its headers
# declare the threaded API (zookeeper_init's own I/O thread, the synchronous calls) only
# when THREADED is defined, so the target defines it for its users.
find_path(ZooKeeperMT_INCLUDE_DIR NAMES zookeeper/zookeeper.h)
find_library(ZooKeeperMT_LIBRARY NAMES zookeeper_mt)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeperMT REQUIRED_VARS ZooKeeperMT_LIBRARY ZooKeeperMT_INCLUDE_DIR)

if(ZooKeeperMT_FOUND AND NOT TARGET ZooKeeperMT::ZooKeeperMT)
  add_library(ZooKeeperMT::ZooKeeperMT UNKNOWN IMPORTED)
  set_target_properties(ZooKeeperMT::ZooKeeperMT PROPERTIES
    IMPORTED_LOCATION "${ZooKeeperMT_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeperMT_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS THREADED)
endif()
mark_as_advanced(ZooKeeperMT_INCLUDE_DIR ZooKeeperMT_LIBRARY)
