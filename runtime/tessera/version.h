// tessera/version.h — library version.
#pragma once

#define TESSERA_VERSION_MAJOR 0
#define TESSERA_VERSION_MINOR 1
#define TESSERA_VERSION_PATCH 0

namespace tessera {
inline constexpr const char* version = "0.1.0";
}
