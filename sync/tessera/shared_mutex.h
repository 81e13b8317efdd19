// tessera/shared_mutex.h — shared_mutex and shared_timed_mutex (defined in
// shared_timed_mutex.h, which documents the box office), and Preshing's
// preshing_shared_mutex for comparison.
#pragma once

#include "tessera/preshing_shared_mutex.h"
#include "tessera/shared_timed_mutex.h"
