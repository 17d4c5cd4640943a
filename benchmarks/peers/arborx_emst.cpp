// The peer's EMST timed on the same cloud as ours, for benchmarks/gpu.py.
//
//   arborx_emst POINTS.npy [MIN_SAMPLES [REPEATS]]
//
// POINTS.npy: a C-order float32 array of shape (n, d), d = 2 or 3 (what
// gpu.py writes).  Prints one JSON object: the median of REPEATS timed
// calls after a warm-up of at least a quarter second (device fenced around
// each), the floor (the
// hierarchy's build plus one nearest-other-point query a point, k = 2 with
// the point itself), the tree's total weight (summed in double, to check
// against ours), and the peak bytes the library's own allocations held
// during one call (the sort's scratch, allocated outside Kokkos, is not
// counted).  Build: benchmarks/peers/build-arborx.sh.
#include <ArborX.hpp>
#include <ArborX_MinimumSpanningTree.hpp>
#include <ArborX_Version.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace
{

struct Cloud
{
  std::int64_t n = 0;
  int d = 0;
  std::vector<float> xyz;
};

[[noreturn]] void fail(std::string const &what)
{
  std::fprintf(stderr, "arborx_emst: %s\n", what.c_str());
  std::exit(2);
}

// A .npy file of float32 in C order: magic, version, header length, a
// Python dict with 'descr', 'fortran_order' and 'shape'.
Cloud read_npy(std::string const &path)
{
  std::ifstream f(path, std::ios::binary);
  if (!f)
    fail("cannot open " + path);
  char magic[8];
  f.read(magic, 8);
  if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    fail(path + " is not a .npy file");
  std::uint32_t header_len = 0;
  if (magic[6] == 1)
  {
    std::uint16_t h;
    f.read(reinterpret_cast<char *>(&h), 2);
    header_len = h;
  }
  else
    f.read(reinterpret_cast<char *>(&header_len), 4);
  std::string header(header_len, ' ');
  f.read(header.data(), header_len);
  if (header.find("'descr': '<f4'") == std::string::npos)
    fail(path + ": not little-endian float32");
  if (header.find("'fortran_order': False") == std::string::npos)
    fail(path + ": not in C order");
  auto s = header.find("'shape': (");
  if (s == std::string::npos)
    fail(path + ": no shape");
  Cloud c;
  if (std::sscanf(header.c_str() + s, "'shape': (%ld, %d)", &c.n, &c.d) != 2)
    fail(path + ": shape is not (n, d)");
  c.xyz.resize(static_cast<std::size_t>(c.n) * c.d);
  f.read(reinterpret_cast<char *>(c.xyz.data()),
         static_cast<std::streamsize>(c.xyz.size() * sizeof(float)));
  if (!f)
    fail(path + ": truncated");
  return c;
}

// Bytes the library's own allocations hold in device memory, and their peak.
std::int64_t held = 0, peak = 0;
bool tracking = false;

void on_alloc(Kokkos_Profiling_SpaceHandle h, char const *, void const *,
              std::uint64_t size)
{
  if (tracking && std::strcmp(h.name, "Host") != 0)
  {
    held += static_cast<std::int64_t>(size);
    peak = std::max(peak, held);
  }
}

void on_free(Kokkos_Profiling_SpaceHandle h, char const *, void const *,
             std::uint64_t size)
{
  if (tracking && std::strcmp(h.name, "Host") != 0)
    held -= static_cast<std::int64_t>(size);
}

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  auto m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string list(std::vector<double> const &v)
{
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

template <int DIM>
void run(Cloud const &c, int min_samples, int repeats)
{
  using Space = Kokkos::DefaultExecutionSpace;
  using Memory = Space::memory_space;
  using Point = ArborX::Point<DIM>;
  Space space;
  Kokkos::View<Point *, Memory> points(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "points"), c.n);
  auto host = Kokkos::create_mirror_view(points);
  for (std::int64_t i = 0; i < c.n; ++i)
    for (int k = 0; k < DIM; ++k)
      host(i)[k] = c.xyz[i * DIM + k];
  Kokkos::deep_copy(points, host);

  auto clock = [] { return std::chrono::steady_clock::now(); };
  auto secs = [](auto a, auto b) {
    return std::chrono::duration<double>(b - a).count();
  };

  double total = 0;
  std::int64_t n_edges = 0;
  {  // warm-up, and the tree's total weight
    ArborX::Experimental::MinimumSpanningTree<Memory> mst(space, points,
                                                          min_samples);
    auto edges = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace{},
                                                     mst.edges);
    n_edges = edges.extent(0);
    for (std::int64_t i = 0; i < n_edges; ++i)
      total += static_cast<double>(edges(i).weight);
  }
  // warm until a quarter second has passed (as gpu.py does for ours): a
  // small cloud's call is shorter than the clocks' ramp from idle
  for (auto start = clock(); secs(start, clock()) < 0.25;)
  {
    ArborX::Experimental::MinimumSpanningTree<Memory> mst(space, points,
                                                          min_samples);
    space.fence();
  }
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r)
  {
    space.fence();
    auto t = clock();
    ArborX::Experimental::MinimumSpanningTree<Memory> mst(space, points,
                                                          min_samples);
    space.fence();
    times.push_back(secs(t, clock()));
  }
  std::vector<double> floor_times;
  for (int r = 0; r < repeats + 1; ++r)
  {
    space.fence();
    auto t = clock();
    ArborX::BoundingVolumeHierarchy bvh(
        space, ArborX::Experimental::attach_indices(points));
    Kokkos::View<int *, Memory> offsets("offsets", 0), indices("indices", 0);
    bvh.query(space, ArborX::Experimental::make_nearest(points, 2),
              ArborX::Experimental::ExtractPairIndexCallback{}, indices,
              offsets);
    space.fence();
    if (r > 0)  // the first is a warm-up
      floor_times.push_back(secs(t, clock()));
  }
  Kokkos::Tools::Experimental::set_allocate_data_callback(on_alloc);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(on_free);
  tracking = true;
  {
    ArborX::Experimental::MinimumSpanningTree<Memory> mst(space, points,
                                                          min_samples);
    space.fence();
  }
  tracking = false;

  std::printf(
      "{\"library\": \"ArborX %s (%s), Kokkos %s\", \"n\": %ld, \"d\": %d, "
      "\"min_samples\": %d, \"n_edges\": %ld, \"total_weight\": %.17g, "
      "\"seconds\": %.6f, \"seconds_all\": %s, \"floor_seconds\": %.6f, "
      "\"floor_seconds_all\": %s, \"peak_bytes_kokkos\": %ld}\n",
      ArborX::version().c_str(), ArborX::gitCommitHash().c_str(),
      ArborX::Details::KokkosExt::version().c_str(), c.n, c.d, min_samples,
      n_edges, total, median(times), list(times).c_str(),
      median(floor_times), list(floor_times).c_str(), peak);
}

}  // namespace

int main(int argc, char *argv[])
{
  if (argc < 2)
    fail("usage: arborx_emst POINTS.npy [MIN_SAMPLES [REPEATS]]");
  Cloud c = read_npy(argv[1]);
  int min_samples = argc > 2 ? std::atoi(argv[2]) : 1;
  int repeats = argc > 3 ? std::atoi(argv[3]) : 5;
  Kokkos::ScopeGuard guard(argc, argv);
  if (c.d == 2)
    run<2>(c, min_samples, repeats);
  else if (c.d == 3)
    run<3>(c, min_samples, repeats);
  else
    fail("d = " + std::to_string(c.d) + ": only 2 and 3 are built");
  return 0;
}
