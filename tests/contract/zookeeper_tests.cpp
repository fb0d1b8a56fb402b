// What only the ZooKeeper bridge promises (and its interop with Kazoo).
#include <catch2/catch.hpp>
