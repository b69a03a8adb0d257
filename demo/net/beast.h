// The one place the demo's HTTP parts (server, schedule follower, client)
// include Boost.Asio and Boost.Beast. <utility> first: Boost 1.74's
// asio/awaitable.hpp uses std::exchange without including it.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <utility>

namespace twinscope::demo {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
}  // namespace twinscope::demo
