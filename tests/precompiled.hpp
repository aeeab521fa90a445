// The tests' precompiled header (cmake/dlockPrecompiled.cmake): GoogleTest
// and the standard headers most tests include. Every file still includes
// what it uses; this only saves parsing them again.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
