// tessera/detail/unique_function.h — a move-only `void()` callable with a small
// inline buffer, for fiber bodies and queued work. Base layer: includes nothing
// of Tessera's.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace tessera::detail {

/// A move-only `void()` callable with a small inline buffer (no allocation for
/// captures up to 48 bytes), for fiber bodies.
class unique_function {
 public:
  unique_function() noexcept = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, unique_function>>>
  explicit unique_function(F&& f) {
    using D = std::decay_t<F>;
    if constexpr (sizeof(D) <= kInline && alignof(D) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      ops_ = &inline_ops<D>;
    } else {
      *reinterpret_cast<D**>(buf_) = new D(std::forward<F>(f));
      ops_ = &heap_ops<D>;
    }
  }
  unique_function(unique_function&& o) noexcept : ops_(o.ops_) {
    if (ops_ != nullptr) ops_->move(o.buf_, buf_);
    o.ops_ = nullptr;
  }
  unique_function& operator=(unique_function&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      if (ops_ != nullptr) ops_->move(o.buf_, buf_);
      o.ops_ = nullptr;
    }
    return *this;
  }
  ~unique_function() { reset(); }
  void operator()() { ops_->invoke(buf_); }
  explicit operator bool() const noexcept { return ops_ != nullptr; }
  void reset() noexcept {
    if (ops_ != nullptr) ops_->destroy(buf_);
    ops_ = nullptr;
  }

 private:
  static constexpr std::size_t kInline = 48;
  struct ops {
    void (*invoke)(void*);
    void (*move)(void* from, void* to) noexcept;
    void (*destroy)(void*) noexcept;
  };
  template <class D>
  static constexpr ops inline_ops{[](void* p) { (*static_cast<D*>(p))(); },
                                  [](void* from, void* to) noexcept {
                                    ::new (to) D(std::move(*static_cast<D*>(from)));
                                    static_cast<D*>(from)->~D();
                                  },
                                  [](void* p) noexcept { static_cast<D*>(p)->~D(); }};
  template <class D>
  static constexpr ops heap_ops{
      [](void* p) { (**static_cast<D**>(p))(); },
      [](void* from, void* to) noexcept { *static_cast<D**>(to) = *static_cast<D**>(from); },
      [](void* p) noexcept { delete *static_cast<D**>(p); }};

  alignas(std::max_align_t) unsigned char buf_[kInline];
  const ops* ops_ = nullptr;
};

}  // namespace tessera::detail
