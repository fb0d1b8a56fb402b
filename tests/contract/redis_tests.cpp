// What only the Redis and Redlock bridges promise (and their interop with redis-py).
#include <catch2/catch.hpp>
