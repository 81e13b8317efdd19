// A game frame with no graphics, written once against a small backend
// interface so that Tessera's jobs and oneTBB run exactly the same systems.
//
// World: N entities with position, velocity, a bounding-sphere radius, an
// animation phase and an AI state. Per frame, ~20 systems in a dependency
// graph:
//   simulation  integrate → grid cells → grid build (counting sort) →
//               broad-phase query (27 neighbouring cells) → collision response;
//               animation (phase, blend weights) and AI (perceive, then — once
//               every batch has perceived — decide: in Tessera's backend the
//               AI jobs wait mid-way on a wait_group, Naughty Dog's counter; in
//               oneTBB's, whose tasks cannot park, it is two parallel loops);
//               particles, audio levels, LOD selection, statistics; then a
//               snapshot of what rendering needs.
//   rendering   culling against a view volume → command-list building into
//               per-piece buffers → merge in piece order → checksum.
// The main thread pipelines: it runs frame N+1's simulation while frame N's
// rendering (on the other snapshot) still runs.
//
// Determinism: every system writes only its own entities' slots, reads of
// others' come from the previous stage, pieces are fixed by the entity count
// (not by the worker count), and reductions combine in index order — so the
// checksum is the same whatever the workers and the timing.
#pragma once

#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace frame {

constexpr float kWorld = 1000.0f;  // the world is a cube [0, kWorld)^3
constexpr float kCell = 8.0f;      // grid cell edge: > 2 × the largest radius
constexpr int kCells = static_cast<int>(kWorld / kCell);
constexpr float kDt = 1.0f / 60.0f;
constexpr std::size_t kPiece = 1024;  // entities per piece of every loop
constexpr int kAiBatches = 16;

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}
inline std::uint32_t bits(float f) {
  std::uint32_t u;
  static_assert(sizeof u == sizeof f);
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}

struct snapshot {
  std::vector<float> x, y, z, r;
  std::vector<std::uint8_t> lod;
  std::vector<std::uint8_t> visible;
  std::vector<std::vector<std::uint32_t>> commands;  // one buffer per piece
  std::uint64_t checksum = 0;
  int frame = -1;
};

struct world {
  explicit world(std::size_t count) : n(count) {
    for (auto* v : {&x, &y, &z, &vx, &vy, &vz, &r, &phase, &blend, &fx, &fy, &fz, &perceived, &particle})
      v->assign(n, 0.0f);
    cell.assign(n, 0);
    contacts.assign(n, 0);
    ai_state.assign(n, 0);
    lod.assign(n, 0);
    sorted.assign(n, 0);
    cell_start.assign(static_cast<std::size_t>(kCells) * kCells * kCells + 1, 0);
    std::uint64_t s = 12345;
    auto rnd = [&s] {  // splitmix64 → [0, 1)
      s += 0x9e3779b97f4a7c15ULL;
      std::uint64_t m = s;
      m = (m ^ (m >> 30)) * 0xbf58476d1ce4e5b9ULL;
      m = (m ^ (m >> 27)) * 0x94d049bb133111ebULL;
      return static_cast<float>((m ^ (m >> 31)) >> 40) / static_cast<float>(1 << 24);
    };
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = rnd() * kWorld;
      y[i] = rnd() * kWorld;
      z[i] = rnd() * kWorld;
      vx[i] = (rnd() - 0.5f) * 40.0f;
      vy[i] = (rnd() - 0.5f) * 40.0f;
      vz[i] = (rnd() - 0.5f) * 40.0f;
      r[i] = 0.5f + rnd() * 3.0f;
      phase[i] = rnd();
    }
  }
  std::size_t pieces() const { return (n + kPiece - 1) / kPiece; }

  std::size_t n;
  std::vector<float> x, y, z, vx, vy, vz, r, phase, blend, fx, fy, fz, perceived, particle;
  std::vector<std::uint32_t> cell, sorted, cell_start;
  std::vector<std::uint16_t> contacts;
  std::vector<std::uint8_t> ai_state, lod;
  float audio_level = 0;
  std::uint64_t stats = 0;
};

// ---- the systems: each works on entities [b, e) ------------------------------------------
inline void integrate(world& w, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    w.vx[i] += w.fx[i] * kDt;
    w.vy[i] += w.fy[i] * kDt - 0.5f * kDt;
    w.vz[i] += w.fz[i] * kDt;
    float* p[3] = {&w.x[i], &w.y[i], &w.z[i]};
    float* v[3] = {&w.vx[i], &w.vy[i], &w.vz[i]};
    for (int k = 0; k < 3; ++k) {
      *p[k] += *v[k] * kDt;
      if (*p[k] < 0.0f) {
        *p[k] = -*p[k];
        *v[k] = -*v[k];
      } else if (*p[k] >= kWorld) {
        *p[k] = 2.0f * kWorld - *p[k] - 1e-3f;
        *v[k] = -*v[k];
      }
    }
  }
}
inline int cell_coord(float v) {
  const int c = static_cast<int>(v / kCell);
  return c < 0 ? 0 : c >= kCells ? kCells - 1 : c;
}
inline void assign_cells(world& w, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    w.cell[i] = static_cast<std::uint32_t>((cell_coord(w.x[i]) * kCells + cell_coord(w.y[i])) * kCells +
                                           cell_coord(w.z[i]));
  }
}
/// Counting sort of entities by cell, in index order within a cell (sequential).
inline void build_grid(world& w) {
  std::fill(w.cell_start.begin(), w.cell_start.end(), 0);
  for (std::size_t i = 0; i < w.n; ++i) ++w.cell_start[w.cell[i] + 1];
  for (std::size_t c = 1; c < w.cell_start.size(); ++c) w.cell_start[c] += w.cell_start[c - 1];
  std::vector<std::uint32_t> next(w.cell_start.begin(), w.cell_start.end() - 1);
  for (std::size_t i = 0; i < w.n; ++i) w.sorted[next[w.cell[i]]++] = static_cast<std::uint32_t>(i);
}
/// Broad phase: contacts and a repulsion force from every overlapping sphere.
inline void collide(world& w, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    const int cx = cell_coord(w.x[i]), cy = cell_coord(w.y[i]), cz = cell_coord(w.z[i]);
    float fx = 0, fy = 0, fz = 0;
    std::uint16_t hits = 0;
    for (int dx = -1; dx <= 1; ++dx) {
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dz = -1; dz <= 1; ++dz) {
          const int X = cx + dx, Y = cy + dy, Z = cz + dz;
          if (X < 0 || Y < 0 || Z < 0 || X >= kCells || Y >= kCells || Z >= kCells) continue;
          const std::size_t c = (static_cast<std::size_t>(X) * kCells + Y) * kCells + Z;
          for (std::uint32_t k = w.cell_start[c]; k < w.cell_start[c + 1]; ++k) {
            const std::uint32_t j = w.sorted[k];
            if (j == i) continue;
            const float ddx = w.x[i] - w.x[j], ddy = w.y[i] - w.y[j], ddz = w.z[i] - w.z[j];
            const float d2 = ddx * ddx + ddy * ddy + ddz * ddz, rr = w.r[i] + w.r[j];
            if (d2 < rr * rr && d2 > 1e-12f) {
              const float inv = (rr - std::sqrt(d2)) / std::sqrt(d2);
              fx += ddx * inv;
              fy += ddy * inv;
              fz += ddz * inv;
              ++hits;
            }
          }
        }
      }
    }
    w.fx[i] = fx * 10.0f;
    w.fy[i] = fy * 10.0f;
    w.fz[i] = fz * 10.0f;
    w.contacts[i] = hits;
  }
}
inline void animate(world& w, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    const float speed = std::sqrt(w.vx[i] * w.vx[i] + w.vy[i] * w.vy[i] + w.vz[i] * w.vz[i]);
    w.phase[i] = std::fmod(w.phase[i] + kDt * (0.5f + speed * 0.05f), 1.0f);
    float acc = 0;
    for (int k = 1; k <= 8; ++k) acc += std::sin(w.phase[i] * 6.2831853f * static_cast<float>(k)) / k;
    w.blend[i] = 0.5f + 0.5f * std::tanh(acc);
  }
}
/// AI, first half: what each entity perceives (its own slot only).
inline void perceive(world& w, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    w.perceived[i] = static_cast<float>(w.contacts[i]) + w.blend[i] + w.y[i] * 1e-3f;
  }
}
/// AI, second half: decides from *other* batches' perceptions — so every
/// batch must have perceived first.
inline void decide(world& w, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    const std::size_t peer = (i * 7919 + 17) % w.n;
    const float p = w.perceived[peer] - w.perceived[i];
    w.ai_state[i] = static_cast<std::uint8_t>(p > 0.5f ? 2 : p < -0.5f ? 0 : 1);
    if (w.ai_state[i] == 2) w.vx[i] *= 0.999f;
  }
}
inline void particles(world& w, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    w.particle[i] = w.particle[i] * 0.95f + static_cast<float>(w.contacts[i]);
  }
}
inline void choose_lod(world& w, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    const float dx = w.x[i] - kWorld / 2, dz = w.z[i] - kWorld / 2;
    const float d = std::sqrt(dx * dx + dz * dz);
    w.lod[i] = static_cast<std::uint8_t>(d < 100 ? 0 : d < 300 ? 1 : 2);
  }
}
inline void audio(world& w) {  // sequential: a reduction in index order
  float level = 0;
  for (std::size_t i = 0; i < w.n; i += 16) level += w.particle[i];
  w.audio_level = level / static_cast<float>(w.n / 16 + 1);
}
inline void statistics(world& w) {
  std::uint64_t h = 0;
  for (std::size_t i = 0; i < w.n; i += 64) h = mix(h, w.contacts[i] + w.ai_state[i] * 131u);
  w.stats = h;
}
inline void take_snapshot(const world& w, snapshot& s, int frame) {
  s.x = w.x;
  s.y = w.y;
  s.z = w.z;
  s.r = w.r;
  s.lod = w.lod;
  s.visible.assign(w.n, 0);
  s.commands.resize(w.pieces());
  s.frame = frame;
  s.checksum = mix(mix(w.stats, bits(w.audio_level)), static_cast<std::uint64_t>(frame));
}
inline void cull(snapshot& s, std::size_t b, std::size_t e) {
  // A view volume that sweeps across the world with the frame number.
  const float cx = std::fmod(static_cast<float>(s.frame) * 3.0f, kWorld);
  for (std::size_t i = b; i < e; ++i) {
    const float dx = s.x[i] - cx, dy = s.y[i] - kWorld / 2;
    s.visible[i] = (dx * dx + dy * dy < 300.0f * 300.0f + s.r[i]) ? 1 : 0;
  }
}
inline void record_commands(snapshot& s, std::size_t piece) {
  auto& out = s.commands[piece];
  out.clear();
  const std::size_t b = piece * kPiece, e = std::min(s.x.size(), b + kPiece);
  for (std::size_t i = b; i < e; ++i) {
    if (!s.visible[i]) continue;
    out.push_back(static_cast<std::uint32_t>(i));  // draw
    out.push_back(bits(s.x[i]) ^ bits(s.y[i]) ^ (s.lod[i] * 0x1000193u));
  }
}
inline void merge_commands(snapshot& s) {
  std::uint64_t h = s.checksum;
  for (const auto& buf : s.commands) {
    for (std::uint32_t v : buf) h = mix(h, v);
  }
  s.checksum = h;
}

}  // namespace frame
