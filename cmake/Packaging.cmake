# Debian packages: `cpack -G DEB` in a shared build (scripts/package) makes
#   libdblock<major>  the shared library (runtime component), named for its SONAME
#   libdblock-dev     headers, CMake config, pkg-config, the .so link and libdblock.a
#   dblock            the command, its man pages, the migrations and deployment files
# Depends of the library and the command come from dpkg-shlibdeps; the -dev package names
# the -dev packages its static library's consumers link against. What lintian asks of them
# (tests/install/install_test.sh fails on any error): each has /usr/share/doc/<package>/ with
# the copyright (machine-readable, Apache-2.0), changelog.Debian.gz and the upstream
# changelog.gz (CHANGELOG.md); man pages are gzip -9n; binaries are stripped, their debug
# symbols in <package>-dbgsym .ddeb files beside the .debs; the library package has a shlibs
# file and the ldconfig trigger.
set(DBLOCK_DEB_MAINTAINER "dblock developers <dblock@users.noreply.github.com>")
set(DBLOCK_DEB_REVISION 1)  # the packaging's own revision: 0.1.0-1
set(DBLOCK_DEB_VERSION ${PROJECT_VERSION}-${DBLOCK_DEB_REVISION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dblock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE ${DBLOCK_DEB_REVISION})
set(CPACK_PACKAGE_CONTACT "${DBLOCK_DEB_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
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
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
# A shlibs file for every package with a shared library (only libdblockN has one). CPack reads
# this variable for all packages alike: a per-component one is ignored.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")  # 0.x: every release may break the ABI

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libdblock${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/debian/triggers)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Each package's synopsis is the first line of its description (CPack puts a common
# CPACK_PACKAGE_DESCRIPTION_SUMMARY above it when one is set: none is); CPack indents the rest
# and turns the empty line into " .".
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "distributed locks kept in the database a service owns - library
Locks, leases with fencing tokens and leader election kept in SQLite,
PostgreSQL, MySQL/MariaDB, Redis, ZooKeeper or etcd.

This package holds the shared library.")

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libdblock-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEVELOPMENT_DEPENDS runtime)
set(CPACK_COMPONENT_DEVELOPMENT_DESCRIPTION "distributed locks kept in the database a service owns - development
Locks, leases with fencing tokens and leader election kept in SQLite,
PostgreSQL, MySQL/MariaDB, Redis, ZooKeeper or etcd.

This package holds the headers, the CMake package (find_package(dblock):
dblock::dblock, dblock::dblock_static, and dblock::asio where Boost's headers
are installed), the pkg-config file and the static library.")
# dblock/asio.hpp, the Boost.Asio adapter, is the one header that needs Boost; the library
# does not, so Boost is only suggested.
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SUGGESTS libboost-dev)
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
set(CPACK_COMPONENT_CLI_DESCRIPTION "run a command while holding a distributed lock
dblock run -- CMD runs a command while holding a lock, like flock(1) across
machines, with the lock kept in SQLite, PostgreSQL, MySQL/MariaDB, Redis,
ZooKeeper or etcd; migrate, sweep, list, release and doctor for operators.

Includes the migrations, and the sweeper's systemd units and Kubernetes
CronJob in /usr/share/dblock.")

# /usr/share/doc/<package>/ of each package. Installed when the prefix is /usr, as a
# distribution package's; other installs get LICENSE and CHANGELOG.md in share/doc/dblock.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(debian_dir ${PROJECT_BINARY_DIR}/debian)
  string(TIMESTAMP DBLOCK_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)  # SOURCE_DATE_EPOCH if set
  configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/changelog.in ${debian_dir}/changelog.Debian @ONLY)
  # gzip -9n: best compression, and no file name or time stamp, so the bytes are reproducible.
  add_custom_command(OUTPUT ${debian_dir}/changelog.Debian.gz ${debian_dir}/changelog.gz
    COMMAND gzip -9nkf ${debian_dir}/changelog.Debian
    COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/CHANGELOG.md ${debian_dir}/changelog
    COMMAND gzip -9nf ${debian_dir}/changelog
    DEPENDS ${debian_dir}/changelog.Debian ${PROJECT_SOURCE_DIR}/CHANGELOG.md VERBATIM)
  add_custom_target(debian_changelogs ALL DEPENDS ${debian_dir}/changelog.Debian.gz ${debian_dir}/changelog.gz)
  foreach(component ${CPACK_COMPONENTS_ALL})
    string(TOUPPER ${component} upper)
    install(FILES ${PROJECT_SOURCE_DIR}/cmake/debian/copyright ${debian_dir}/changelog.Debian.gz
                  ${debian_dir}/changelog.gz
            DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${CPACK_DEBIAN_${upper}_PACKAGE_NAME} COMPONENT ${component})
  endforeach()
else()
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md
          DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT development)
endif()
include(CPack)
