// beast_hello — the C++ peer a server author would pick instead of Tessera:
// Boost.Beast on Asio, a C++20 coroutine per connection, one io_context on
// one thread. It answers netbench's "/" and TechEmpower's /plaintext and
// /json as samples/http_server and samples/tfb_server do: Server, Date
// (refreshed once a second), Content-Type, Content-Length; keep-alive, and
// pipelined requests read from the buffer one after another, each answered
// with its own write.
//
//   beast_hello --port 8088        prints "listening on 127.0.0.1:PORT"
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

/// The Date value for this second, cached (one thread).
const std::string& date_now() {
  static std::time_t cached = 0;
  static std::string value;
  const std::time_t now = std::time(nullptr);
  if (now != cached) {
    cached = now;
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[64];
    value.assign(buf, std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm));
  }
  return value;
}

http::response<http::string_body> respond(const http::request<http::string_body>& req) {
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  res.set(http::field::server, "beast");
  res.set(http::field::date, date_now());
  const beast::string_view target = req.target();
  if (target == "/" || target == "/plaintext") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "text/plain");
    res.body() = "Hello, World!";
  } else if (target == "/json") {
    res.result(http::status::ok);
    res.set(http::field::content_type, "application/json");
    res.body() = nlohmann::json{{"message", "Hello, World!"}}.dump();
  } else {
    res.result(http::status::not_found);
    res.set(http::field::content_type, "text/plain");
    res.body() = "Not Found";
  }
  res.prepare_payload();
  return res;
}

asio::awaitable<void> serve_connection(tcp::socket socket) {
  socket.set_option(tcp::no_delay(true));
  beast::flat_buffer buffer;
  beast::error_code ec;
  for (;;) {
    http::request<http::string_body> req;
    co_await http::async_read(socket, buffer, req, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;  // end of stream, reset, or a malformed request
    const auto res = respond(req);
    co_await http::async_write(socket, res, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !res.keep_alive()) break;
  }
  socket.shutdown(tcp::socket::shutdown_send, ec);
}

asio::awaitable<void> listen(tcp::acceptor& acceptor) {
  for (;;) {
    beast::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (!ec)
      asio::co_spawn(acceptor.get_executor(), serve_connection(std::move(socket)), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"beast_hello: Boost.Beast HTTP/1.1 peer, C++20 coroutines, one thread"};
  unsigned short port = 8088;
  app.add_option("-p,--port", port, "Port (0: any free one)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  asio::io_context ctx(1);
  tcp::acceptor acceptor(ctx, tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  std::printf("listening on 127.0.0.1:%u\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  asio::co_spawn(ctx, listen(acceptor), asio::detached);
  ctx.run();
}
