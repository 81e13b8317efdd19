// lockfree_channel<T> against channel<T>'s tests (the same contract), plus
// what only the lock-free channel has to show: close racing every kind of
// operation, and its segments reclaimed.
#include <tessera/lockfree_channel.h>
#define TEST_CHANNEL lockfree_channel
#define ChannelIn LockfreeChannelIn
#define ChannelDeathTest LockfreeChannelDeathTest
#define kChannelName "tessera::lockfree_channel"
#include "channel_test.cpp"
