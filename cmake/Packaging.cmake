# Debian packages: `cpack -G DEB` in a shared build (scripts/package) makes
#   libdblock<major>  the shared library (runtime component), named for its SONAME
#   libdblock-dev     headers, CMake config, pkg-config, the .so link and libdblock.a
#   dblock            the command, its man pages, the migrations and deployment files
# Depends of the library and the command come from dpkg-shlibdeps; the -dev package names
# the -dev packages its static library's consumers link against.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dblock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "dblock developers <dblock@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed locks kept in the database a service already owns")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime development)
if(DBLOCK_BUILD_CLI)
  list(APPEND CPACK_COMPONENTS_ALL cli)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The command needs libdblock.so.N, which no installed package has yet: found in the build
# tree, and depended on by the component dependency below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_CURRENT_BINARY_DIR})
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.invalid/dblock")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libdblock${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_GENERATE_SHLIBS_POLICY "=")  # 0.x: every release may break the ABI
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "dblock: distributed locks (shared library)
 Locks, leases with fencing tokens and leader election kept in SQLite, PostgreSQL,
 MySQL/MariaDB, Redis, ZooKeeper or etcd.")

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libdblock-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEVELOPMENT_DEPENDS runtime)
set(CPACK_COMPONENT_DEVELOPMENT_DESCRIPTION "dblock: distributed locks (development files)
 Headers, CMake package (find_package(dblock): dblock::dblock, dblock::dblock_static),
 pkg-config file and static library.")
set(dev_depends libfmt-dev libsqlitecpp-dev zlib1g-dev)
if(DBLOCK_WITH_POSTGRESQL)
  list(APPEND dev_depends libpqxx-dev)
endif()
if(DBLOCK_WITH_MYSQL)
  list(APPEND dev_depends libmysqlcppconn-dev)
endif()
if(DBLOCK_WITH_REDIS)
  list(APPEND dev_depends libhiredis-dev)
endif()
if(DBLOCK_WITH_ZOOKEEPER)
  list(APPEND dev_depends libzookeeper-mt-dev)
endif()
if(DBLOCK_WITH_ETCD)
  list(APPEND dev_depends libgrpc++-dev libprotobuf-dev)
endif()
list(JOIN dev_depends ", " CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME dblock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_CLI_DEPENDS runtime)
set(CPACK_COMPONENT_CLI_DESCRIPTION "dblock: distributed locks (command)
 dblock run -- CMD runs a command while holding a lock, like flock(1) across machines;
 migrate, sweep, list, release and doctor for operators. Includes the migrations and the
 sweeper's systemd units and Kubernetes CronJob in /usr/share/dblock.")
include(CPack)
