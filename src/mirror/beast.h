// The one place that includes Boost.Asio and Boost.Beast for the mirror.
// <utility> first: Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including it, which g++ 12's libstdc++ no longer pulls in.
#pragma once

// clang-format off
#include <utility>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on

namespace twinscope::mirror {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
}  // namespace twinscope::mirror
