// Myers' O(ND) alignment, patience anchors and the greedy fallback of the join's alignment.
#include "join/align.h"

#include <algorithm>
#include <unordered_map>

namespace twinscope::join {

namespace {

struct Snake {
  int64_t d = 0, x = 0, y = 0, u = 0, v = 0;  // D of the whole; the middle snake from (x, y) to (u, v)
};

// Myers' middle snake (section 4b of the paper): the forward and the reverse search meet on a snake of an
// optimal path. O((N+M) D) time, O(D) memory. False when D exceeds dlimit.
bool MiddleSnake(const uint32_t* a, int64_t n, const uint32_t* b, int64_t m, int64_t dlimit, std::vector<int64_t>& vf,
                 std::vector<int64_t>& vb, Snake* s) {
  const int64_t delta = n - m;
  const bool odd = (delta % 2) != 0;
  const int64_t maxd = std::min((n + m + 1) / 2, dlimit / 2 + 1);
  const int64_t off = maxd + 1;
  vf.assign(static_cast<size_t>(2 * maxd + 3), 0);
  vb.assign(static_cast<size_t>(2 * maxd + 3), 0);
  auto F = [&](int64_t k) -> int64_t& { return vf[static_cast<size_t>(off + k)]; };
  auto B = [&](int64_t k) -> int64_t& { return vb[static_cast<size_t>(off + k)]; };
  for (int64_t d = 0; d <= maxd; ++d) {
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x = (k == -d || (k != d && F(k - 1) < F(k + 1))) ? F(k + 1) : F(k - 1) + 1;
      int64_t y = x - k;
      const int64_t x0 = x, y0 = y;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      F(k) = x;
      const int64_t c = delta - k;  // the same diagonal in the reverse search's coordinates
      if (odd && c >= -(d - 1) && c <= d - 1 && F(k) + B(c) >= n) {
        *s = {2 * d - 1, x0, y0, x, y};
        return s->d <= dlimit;
      }
    }
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x = (k == -d || (k != d && B(k - 1) < B(k + 1))) ? B(k + 1) : B(k - 1) + 1;
      int64_t y = x - k;
      const int64_t x0 = x, y0 = y;
      while (x < n && y < m && a[n - x - 1] == b[m - y - 1]) ++x, ++y;
      B(k) = x;
      const int64_t c = delta - k;
      if (!odd && c >= -d && c <= d && B(k) + F(c) >= n) {
        *s = {2 * d, n - x, m - y, n - x0, m - y0};
        return s->d <= dlimit;
      }
    }
  }
  return false;
}

// The pairs of one longest common subsequence by divide and conquer on middle snakes.
bool LinearLcs(const uint32_t* a, int64_t n, const uint32_t* b, int64_t m, int64_t dlimit, uint32_t a_base,
               uint32_t b_base, std::vector<int64_t>& vf, std::vector<int64_t>& vb, std::vector<AlignPair>* out) {
  if (n == 0 || m == 0) return n + m <= dlimit;
  Snake s;
  if (!MiddleSnake(a, n, b, m, dlimit, vf, vb, &s)) return false;
  if (s.d > 1) {
    LinearLcs(a, s.x, b, s.y, s.d, a_base, b_base, vf, vb, out);
    for (int64_t i = s.x; i < s.u; ++i)
      out->emplace_back(static_cast<uint32_t>(a_base + i), static_cast<uint32_t>(b_base + s.y + (i - s.x)));
    LinearLcs(a + s.u, n - s.u, b + s.v, m - s.v, s.d, static_cast<uint32_t>(a_base + s.u),
              static_cast<uint32_t>(b_base + s.v), vf, vb, out);
    return true;
  }
  // D <= 1: one sequence is the other with at most one item more.
  for (int64_t i = 0, j = 0; i < n && j < m;) {
    if (a[i] == b[j]) {
      out->emplace_back(static_cast<uint32_t>(a_base + i), static_cast<uint32_t>(b_base + j));
      ++i, ++j;
    } else if (n > m) {
      ++i;
    } else {
      ++j;
    }
  }
  return true;
}

}  // namespace

bool MyersAlign(const uint32_t* a, size_t n, const uint32_t* b, size_t m, size_t max_d, uint32_t a_base,
                uint32_t b_base, std::vector<AlignPair>* out) {
  if (n == 0 || m == 0) return n + m <= max_d;
  if ((n > m ? n - m : m - n) > max_d) return false;  // the length difference alone is past the bound
  std::vector<int64_t> vf, vb;
  std::vector<AlignPair> pairs;
  if (!LinearLcs(a, static_cast<int64_t>(n), b, static_cast<int64_t>(m), static_cast<int64_t>(max_d), a_base, b_base,
                 vf, vb, &pairs))
    return false;
  out->insert(out->end(), pairs.begin(), pairs.end());
  return true;
}

namespace {

// Greedy in order over a[a0, a1) and b[b0, b1): each b item takes the first
// unused a item after the last pair with an equal key, else an equal token.
void Greedy(const std::vector<uint32_t>& ta, const std::vector<uint32_t>& tb, const std::vector<uint64_t>& ka,
            const std::vector<uint64_t>& kb, size_t a0, size_t a1, size_t b0, size_t b1, std::vector<AlignPair>* out) {
  struct Queue {
    std::vector<uint32_t> pos;
    size_t cursor = 0;
  };
  std::unordered_map<uint64_t, Queue> by_key;
  std::unordered_map<uint32_t, Queue> by_token;
  for (size_t i = a0; i < a1; ++i) {
    by_key[ka[i]].pos.push_back(static_cast<uint32_t>(i));
    by_token[ta[i]].pos.push_back(static_cast<uint32_t>(i));
  }
  int64_t last = static_cast<int64_t>(a0) - 1;
  auto next = [&](Queue& q) -> int64_t {
    while (q.cursor < q.pos.size() && static_cast<int64_t>(q.pos[q.cursor]) <= last) ++q.cursor;
    return q.cursor < q.pos.size() ? static_cast<int64_t>(q.pos[q.cursor]) : int64_t{-1};
  };
  for (size_t j = b0; j < b1; ++j) {
    int64_t p = -1;
    auto k = by_key.find(kb[j]);
    if (k != by_key.end()) {
      p = next(k->second);
      if (p >= 0 && ta[static_cast<size_t>(p)] != tb[j]) p = -1;  // an equal key must be an equal token too
    }
    if (p < 0) {
      auto t = by_token.find(tb[j]);
      if (t != by_token.end()) p = next(t->second);
    }
    if (p < 0) continue;
    out->emplace_back(static_cast<uint32_t>(p), static_cast<uint32_t>(j));
    last = p;
  }
}

}  // namespace

std::vector<AlignPair> UniqueAnchors(const std::vector<uint32_t>& ta, const std::vector<uint32_t>& tb,
                                     const std::vector<uint64_t>& ka, const std::vector<uint64_t>& kb) {
  std::vector<AlignPair> anchors;
  struct Seen {
    uint32_t count_a = 0, count_b = 0, pos_a = 0, pos_b = 0;
  };
  std::unordered_map<uint64_t, Seen> seen;
  seen.reserve(ta.size() + tb.size());
  for (size_t i = 0; i < ka.size(); ++i) {
    Seen& s = seen[ka[i]];
    ++s.count_a, s.pos_a = static_cast<uint32_t>(i);
  }
  for (size_t j = 0; j < kb.size(); ++j) {
    auto it = seen.find(kb[j]);
    if (it == seen.end()) continue;
    ++it->second.count_b, it->second.pos_b = static_cast<uint32_t>(j);
  }
  std::vector<AlignPair> cand;  // by b position
  for (size_t j = 0; j < kb.size(); ++j) {
    auto it = seen.find(kb[j]);
    if (it == seen.end() || it->second.count_a != 1 || it->second.count_b != 1) continue;
    if (ta[it->second.pos_a] != tb[j]) continue;
    cand.emplace_back(it->second.pos_a, static_cast<uint32_t>(j));
  }
  // Longest chain increasing in a (b already increases): patience sorting.
  std::vector<size_t> tails, prev(cand.size(), SIZE_MAX);
  for (size_t i = 0; i < cand.size(); ++i) {
    auto it = std::lower_bound(tails.begin(), tails.end(), cand[i].first,
                               [&](size_t t, uint32_t x) { return cand[t].first < x; });
    if (it != tails.begin()) prev[i] = *(it - 1);
    if (it == tails.end())
      tails.push_back(i);
    else
      *it = i;
  }
  for (size_t i = tails.empty() ? SIZE_MAX : tails.back(); i != SIZE_MAX; i = prev[i]) anchors.push_back(cand[i]);
  std::reverse(anchors.begin(), anchors.end());
  return anchors;
}

std::vector<AlignPair> AlignSequences(const std::vector<uint32_t>& ta, const std::vector<uint32_t>& tb,
                                      const std::vector<uint64_t>& ka, const std::vector<uint64_t>& kb,
                                      const AlignOptions& options, AlignStats* stats) {
  AlignStats local;
  AlignStats& st = stats ? *stats : local;
  st = AlignStats{};
  std::vector<AlignPair> out;
  if (ta == tb) {
    st.identical = true;
    out.reserve(ta.size());
    for (size_t i = 0; i < ta.size(); ++i) out.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(i));
    return out;
  }
  // 2. Anchors: keys unique on both sides, equal tokens, longest increasing chain.
  const std::vector<AlignPair> anchors = UniqueAnchors(ta, tb, ka, kb);
  st.anchors = anchors.size();
  // 3. Between anchors (and before the first, after the last).
  size_t a0 = 0, b0 = 0;
  auto segment = [&](size_t a1, size_t b1) {
    // Common prefix and suffix need no search.
    while (a0 < a1 && b0 < b1 && ta[a0] == tb[b0]) out.emplace_back(a0++, b0++);
    std::vector<AlignPair> tail;
    while (a1 > a0 && b1 > b0 && ta[a1 - 1] == tb[b1 - 1]) --a1, --b1, tail.emplace_back(a1, b1);
    if (a1 > a0 && b1 > b0) {
      ++st.segments;
      const size_t before = out.size();
      if (MyersAlign(ta.data() + a0, a1 - a0, tb.data() + b0, b1 - b0, options.max_d, static_cast<uint32_t>(a0),
                     static_cast<uint32_t>(b0), &out)) {
        const uint64_t d = (a1 - a0) + (b1 - b0) - 2 * (out.size() - before);
        st.max_d_seen = std::max(st.max_d_seen, d);
      } else {
        ++st.capped_segments;
        st.capped_launches += b1 - b0;
        Greedy(ta, tb, ka, kb, a0, a1, b0, b1, &out);
      }
    }
    out.insert(out.end(), tail.rbegin(), tail.rend());
  };
  for (const auto& [pa, pb] : anchors) {
    segment(pa, pb);
    out.emplace_back(pa, pb);
    a0 = pa + 1, b0 = pb + 1;
  }
  segment(ta.size(), tb.size());
  return out;
}

size_t SlidePositions(const std::vector<uint32_t>& seq, size_t start, size_t len, size_t lo, size_t hi) {
  if (len == 0) return 1;
  size_t positions = 1;
  for (size_t s = start; s > lo && seq[s - 1] == seq[s - 1 + len]; --s) ++positions;
  for (size_t s = start; s + len < hi && seq[s] == seq[s + len]; ++s) ++positions;
  return positions;
}

}  // namespace twinscope::join
