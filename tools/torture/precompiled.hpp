// The verifier's precompiled header (cmake/dlockPrecompiled.cmake): the
// standard headers most of its files include. Every file still includes
// what it uses; this only saves parsing them again.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
