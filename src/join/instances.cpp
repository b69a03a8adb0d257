// Two-level alignment: range instances by normalized name and content, then launches within aligned pairs.
#include "join/instances.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace twinscope::join {
namespace {

constexpr uint64_t kFnvBasis = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

uint64_t Mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * kFnvPrime;
  return h;
}

uint64_t HashString(std::string_view s, uint64_t h = kFnvBasis) {
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * kFnvPrime;
  return h;
}

// Diff's compaction: a pure insertion followed, after aligned pairs, by a pure deletion (or the reverse) is
// slid over those pairs when the tokens allow it, so the two meet in one region (paired there as diverged: a
// launch repacked among identical ones). The pairs stay equal-token pairs in order.
void CompactEdits(const uint32_t* tp, size_t np, const uint32_t* ts, size_t ns, std::vector<AlignPair>* pairs) {
  auto& pr = *pairs;
  auto gap = [&](size_t k, size_t* a0, size_t* a1, size_t* b0, size_t* b1) {
    *a0 = k ? pr[k - 1].first + 1 : 0, *b0 = k ? pr[k - 1].second + 1 : 0;
    *a1 = k < pr.size() ? pr[k].first : np, *b1 = k < pr.size() ? pr[k].second : ns;
  };
  constexpr size_t kMaxSlide = 100'000;
  size_t prev = SIZE_MAX;
  for (size_t k = 0; k <= pr.size(); ++k) {
    size_t a0, a1, b0, b1;
    gap(k, &a0, &a1, &b0, &b1);
    if (a0 == a1 && b0 == b1) continue;
    if (prev != SIZE_MAX && k - prev <= kMaxSlide) {
      size_t pa0, pa1, pb0, pb1;
      gap(prev, &pa0, &pa1, &pb0, &pb1);
      const size_t m = k - prev;
      if (pa0 == pa1 && pb1 > pb0 && b0 == b1 && a1 > a0) {  // shadow-only, then primary-only
        bool ok = true;
        for (size_t j = 0; j < m && ok; ++j) ok = ts[pb0 + j] == ts[pb1 + j];
        if (ok)
          for (size_t j = 0; j < m; ++j) pr[prev + j].second = static_cast<uint32_t>(pb0 + j);
      } else if (pb0 == pb1 && pa1 > pa0 && a0 == a1 && b1 > b0) {  // primary-only, then shadow-only
        bool ok = true;
        for (size_t j = 0; j < m && ok; ++j) ok = tp[pa0 + j] == tp[pa1 + j];
        if (ok)
          for (size_t j = 0; j < m; ++j) pr[prev + j].first = static_cast<uint32_t>(pa0 + j);
      }
    }
    prev = k;
  }
}

void AddStats(const AlignStats& s, AlignStats* to) {
  to->anchors += s.anchors;
  to->segments += s.segments;
  to->capped_segments += s.capped_segments;
  to->capped_launches += s.capped_launches;
  to->max_d_seen = std::max(to->max_d_seen, s.max_d_seen);
}

// Launch pairs of one aligned pair of instances, in instance-local indices. Runs of one token are collapsed
// first: equal runs pair their common length, the rest is left for the search of the stretch around it.
std::vector<AlignPair> AlignInside(const uint32_t* ta, const uint64_t* ka, size_t n, const uint32_t* tb,
                                   const uint64_t* kb, size_t m, const AlignOptions& ao, AlignStats* st) {
  std::vector<AlignPair> out;
  if (n == m && std::equal(ta, ta + n, tb)) {
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(i));
    return out;
  }
  struct Runs {
    std::vector<uint32_t> token, start, len;
    std::vector<uint64_t> key;
  };
  auto collapse = [](const uint32_t* t, const uint64_t* k, size_t len) {
    Runs r;
    for (size_t i = 0; i < len;) {
      size_t e = i + 1;
      while (e < len && t[e] == t[i]) ++e;
      r.token.push_back(t[i]), r.start.push_back(static_cast<uint32_t>(i));
      r.len.push_back(static_cast<uint32_t>(e - i)), r.key.push_back(k[i]);
      i = e;
    }
    return r;
  };
  Runs ra = collapse(ta, ka, n), rb = collapse(tb, kb, m);
  // Stretches left to search (launch-local), between the pairs the collapsed runs gave.
  std::vector<AlignPair> fixed;
  if (ra.token.size() < n || rb.token.size() < m) {
    AlignStats rs;
    for (const auto& [x, y] : AlignSequences(ra.token, rb.token, ra.key, rb.key, ao, &rs)) {
      const uint32_t sa = ra.start[x], sb = rb.start[y], la = ra.len[x], lb = rb.len[y];
      if (la == lb) {
        for (uint32_t i = 0; i < la; ++i) fixed.emplace_back(sa + i, sb + i);
        continue;
      }
      // Runs of other lengths: which launches pair is the keys' (ordinals) to say, where they can.
      std::vector<uint32_t> u(la, ra.token[x]), v(lb, rb.token[y]);
      std::vector<uint64_t> uk(ka + sa, ka + sa + la), vk(kb + sb, kb + sb + lb);
      for (const auto& [i, j] : AlignSequences(u, v, uk, vk, ao, nullptr)) fixed.emplace_back(sa + i, sb + j);
    }
    AddStats(rs, st);
  }
  size_t a0 = 0, b0 = 0;
  auto search = [&](size_t a1, size_t b1) {
    if (a1 <= a0 || b1 <= b0) return;
    std::vector<uint32_t> sa(ta + a0, ta + a1), sb(tb + b0, tb + b1);
    std::vector<uint64_t> sk(ka + a0, ka + a1), tk(kb + b0, kb + b1);
    AlignStats s;
    for (const auto& [x, y] : AlignSequences(sa, sb, sk, tk, ao, &s))
      out.emplace_back(static_cast<uint32_t>(x + a0), static_cast<uint32_t>(y + b0));
    AddStats(s, st);
  };
  for (const auto& [x, y] : fixed) {
    search(x, y);
    out.emplace_back(x, y);
    a0 = x + 1, b0 = y + 1;
  }
  search(n, m);
  CompactEdits(ta, n, tb, m, &out);
  return out;
}

// Instances between two anchors (or at the ends): a weighted longest common subsequence of pairs of one
// normalized name (or, weighing less, of other names but the same kernels in the same order), preferring
// equal content, equal kernels, similar length and the same instance number.
void PairByName(const std::vector<Instance>& a, const std::vector<Instance>& b, size_t i0, size_t i1, size_t j0,
                size_t j1, size_t max_cells, std::vector<AlignPair>* out) {
  const size_t p = i1 - i0, s = j1 - j0;
  if (p == 0 || s == 0) return;
  if (p * s > max_cells) {  // in order: each shadow instance takes the next primary one of its name
    // (the caller paired content-equal ones by a search first)
    std::unordered_map<uint32_t, std::vector<uint32_t>> by_name;
    for (size_t i = i0; i < i1; ++i) by_name[a[i].name_id].push_back(static_cast<uint32_t>(i));
    std::unordered_map<uint32_t, size_t> cursor;
    int64_t last = static_cast<int64_t>(i0) - 1;
    for (size_t j = j0; j < j1; ++j) {
      auto it = by_name.find(b[j].name_id);
      if (it == by_name.end()) continue;
      size_t& c = cursor[b[j].name_id];
      while (c < it->second.size() && static_cast<int64_t>(it->second[c]) <= last) ++c;
      if (c == it->second.size()) continue;
      last = it->second[c++];
      out->emplace_back(static_cast<uint32_t>(last), static_cast<uint32_t>(j));
    }
    return;
  }
  auto weight = [&](size_t i, size_t j) -> int64_t {
    const Instance &x = a[i], &y = b[j];
    const bool same_kernels = x.kernels == y.kernels;
    if (x.name_id != y.name_id && !same_kernels) return 0;
    const uint64_t lx = x.end - x.begin, ly = y.end - y.begin;
    int64_t w = x.name_id == y.name_id ? 1000 : 600;  // another name, the same kernels: the same work renamed
    w += static_cast<int64_t>(20 * std::min(lx, ly) / std::max<uint64_t>(1, std::max(lx, ly)));
    if (same_kernels) w += 40;
    if (x.content == y.content && lx == ly) w += 100;
    if (x.name == y.name) w += 30;
    return w;
  };
  std::vector<int64_t> dp((p + 1) * (s + 1), 0);
  auto at = [&](size_t i, size_t j) -> int64_t& { return dp[i * (s + 1) + j]; };
  for (size_t i = 1; i <= p; ++i)
    for (size_t j = 1; j <= s; ++j) {
      int64_t best = std::max(at(i - 1, j), at(i, j - 1));
      const int64_t w = weight(i0 + i - 1, j0 + j - 1);
      if (w) best = std::max(best, at(i - 1, j - 1) + w);
      at(i, j) = best;
    }
  std::vector<AlignPair> rev;
  for (size_t i = p, j = s; i > 0 && j > 0;) {
    const int64_t w = weight(i0 + i - 1, j0 + j - 1);
    if (w && at(i, j) == at(i - 1, j - 1) + w) {
      rev.emplace_back(static_cast<uint32_t>(i0 + i - 1), static_cast<uint32_t>(j0 + j - 1));
      --i, --j;
    } else if (at(i, j) == at(i - 1, j)) {
      --i;
    } else {
      --j;
    }
  }
  out->insert(out->end(), rev.rbegin(), rev.rend());
}

// Depth (1 = top level) of the instances: the shallowest with at least two instances on either side.
uint32_t ChooseDepth(const std::vector<std::vector<std::string_view>>& distinct_paths) {
  size_t max_depth = 0;
  std::vector<std::vector<std::vector<size_t>>> ends(distinct_paths.size());
  for (size_t side = 0; side < distinct_paths.size(); ++side)
    for (auto p : distinct_paths[side]) {
      ends[side].push_back(ElementEnds(p));
      max_depth = std::max(max_depth, ends[side].back().size());
    }
  for (size_t d = 1; d <= max_depth; ++d)
    for (size_t side = 0; side < distinct_paths.size(); ++side) {
      std::unordered_set<std::string_view> seen;
      for (size_t i = 0; i < distinct_paths[side].size(); ++i) {
        const auto& e = ends[side][i];
        if (e.size() < d) continue;
        seen.insert(distinct_paths[side][i].substr(0, e[d - 1]));
        if (seen.size() >= 2) return static_cast<uint32_t>(d);
      }
    }
  return 1;
}

}  // namespace

std::vector<size_t> ElementEnds(std::string_view path) {
  std::vector<size_t> ends;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '#' || (i > 0 && path[i - 1] == ' ')) continue;
    size_t e = i + 1;
    while (e < path.size() && path[e] >= '0' && path[e] <= '9') ++e;
    if (e > i + 1 && (e == path.size() || path[e] == '/')) ends.push_back(e), i = e;
  }
  return ends;
}

TwoLevelResult AlignTwoLevel(const AlignSide& a, const AlignSide& b, const RangeNormalizer& norm,
                             const TwoLevelOptions& options) {
  TwoLevelResult r;
  r.stats.identical = a.tokens == b.tokens;
  // 1. The depth, from the distinct paths of both sides.
  std::vector<std::vector<std::string_view>> distinct(2);
  {
    std::unordered_set<std::string_view> seen;
    for (int side = 0; side < 2; ++side) {
      seen.clear();
      for (const std::string* p : (side ? b : a).paths)
        if (seen.insert(*p).second) distinct[side].push_back(*p);
    }
  }
  r.depth = ChooseDepth(distinct);
  // 2. Instances: runs of launches under one prefix at that depth.
  std::unordered_map<std::string, uint32_t> name_ids;
  std::unordered_map<std::string_view, std::string_view> prefix_of;
  auto build = [&](const AlignSide& side, std::vector<Instance>* out, std::vector<uint32_t>* of) {
    prefix_of.clear();
    of->assign(side.paths.size(), 0);
    for (size_t i = 0; i < side.paths.size(); ++i) {
      std::string_view path = *side.paths[i];
      auto it = prefix_of.find(path);
      if (it == prefix_of.end()) {
        const auto ends = ElementEnds(path);
        const size_t cut = ends.empty() ? 0 : ends[std::min<size_t>(r.depth, ends.size()) - 1];
        it = prefix_of.emplace(path, path.substr(0, cut)).first;
      }
      if (out->empty() || out->back().name != it->second) {
        Instance in;
        in.begin = static_cast<uint32_t>(i);
        in.name = std::string(it->second);
        auto n = name_ids.emplace(norm.Normalize(in.name), static_cast<uint32_t>(name_ids.size())).first;
        in.name_id = n->second;
        in.content = kFnvBasis, in.kernels = kFnvBasis;
        out->push_back(std::move(in));
      }
      Instance& in = out->back();
      in.end = static_cast<uint32_t>(i + 1);
      in.content = Mix(in.content, side.tokens[i]);
      in.kernels = Mix(in.kernels, side.kernels[i]);
      (*of)[i] = static_cast<uint32_t>(out->size() - 1);
    }
  };
  build(a, &r.a, &r.instance_of_a);
  build(b, &r.b, &r.instance_of_b);
  // 3. Instances: anchored by unique name and content, then paired by normalized name and content.
  std::vector<AlignPair> inst;
  {
    std::map<std::pair<uint32_t, uint64_t>, uint32_t> ids;
    auto tokens = [&](const std::vector<Instance>& v, std::vector<uint32_t>* t, std::vector<uint64_t>* k) {
      for (const auto& in : v) {
        t->push_back(
            ids.emplace(std::make_pair(in.name_id, in.content), static_cast<uint32_t>(ids.size())).first->second);
        k->push_back(HashString(in.name, in.content));
      }
    };
    std::vector<uint32_t> ta, tb;
    std::vector<uint64_t> ka, kb;
    tokens(r.a, &ta, &ka);
    tokens(r.b, &tb, &kb);
    AlignOptions ao;
    ao.max_d = options.max_d;
    // Anchors: instances whose name (with its instance number) and content are unique on both sides; between
    // them the weighted pairing, or where it would be too large a search on content first.
    const auto anchors = UniqueAnchors(ta, tb, ka, kb);
    size_t i = 0, j = 0;
    auto between = [&](size_t i1, size_t j1) {
      if ((i1 - i) * (j1 - j) <= options.max_instance_cells) {
        PairByName(r.a, r.b, i, i1, j, j1, options.max_instance_cells, &inst);
        return;
      }
      std::vector<uint32_t> sa(ta.begin() + i, ta.begin() + i1), sb(tb.begin() + j, tb.begin() + j1);
      std::vector<uint64_t> sk(ka.begin() + i, ka.begin() + i1), tk(kb.begin() + j, kb.begin() + j1);
      size_t x0 = i, y0 = j;
      for (const auto& [x, y] : AlignSequences(sa, sb, sk, tk, ao, nullptr)) {
        PairByName(r.a, r.b, x0, x + i, y0, y + j, options.max_instance_cells, &inst);
        inst.emplace_back(x + i, y + j);
        x0 = x + i + 1, y0 = y + j + 1;
      }
      PairByName(r.a, r.b, x0, i1, y0, j1, options.max_instance_cells, &inst);
    };
    for (const auto& [x, y] : anchors) {
      between(x, y);
      inst.emplace_back(x, y);
      i = x + 1, j = y + 1;
    }
    between(r.a.size(), r.b.size());
  }
  r.partner_a.assign(r.a.size(), -1);
  r.partner_b.assign(r.b.size(), -1);
  r.bounded_a.assign(r.a.size(), 0);
  // 4. Launches inside each aligned pair.
  AlignOptions ao;
  ao.max_d = options.max_d;
  for (const auto& [x, y] : inst) {
    r.partner_a[x] = static_cast<int32_t>(y), r.partner_b[y] = static_cast<int32_t>(x);
    const Instance &ia = r.a[x], &ib = r.b[y];
    AlignStats st;
    const auto local = AlignInside(a.tokens.data() + ia.begin, a.keys.data() + ia.begin, ia.end - ia.begin,
                                   b.tokens.data() + ib.begin, b.keys.data() + ib.begin, ib.end - ib.begin, ao, &st);
    for (const auto& [p, q] : local) r.pairs.emplace_back(p + ia.begin, q + ib.begin);
    if (st.capped_segments) ++r.bounded_instances, r.bounded_launches += ib.end - ib.begin, r.bounded_a[x] = 1;
    AddStats(st, &r.stats);
  }
  return r;
}

}  // namespace twinscope::join
