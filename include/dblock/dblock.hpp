/// @file
/// dblock: distributed locks kept in the SQL database a service already owns.
#pragma once

#include "dblock/client.hpp"
#include "dblock/duration.hpp"
#include "dblock/errors.hpp"
#include "dblock/events.hpp"
#include "dblock/leadership.hpp"
#include "dblock/lease.hpp"
#include "dblock/lock.hpp"
#include "dblock/options.hpp"
#include "dblock/settings.hpp"
#include "dblock/sweeper.hpp"
#include "dblock/version.hpp"
