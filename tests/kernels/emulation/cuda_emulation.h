// CPU emulation of the CUDA C subset nvmathpy's generated kernels use, for the kernel-numerics tests.
//
// The generated source is compiled by g++ with NVMATHPY_EMULATION defined and this header
// force-included. A launch runs the blocks of the grid one after another on one team of
// std::threads (one per CUDA thread of a block); __syncthreads is a barrier of the team, and the
// team also meets at a barrier between blocks. __shared__ variables become function-level
// statics: one copy, reused by each block in turn, as shared memory is. __half and
// __nv_bfloat16 are 16-bit software types with the CUDA round-to-nearest-even conversions.
#pragma once

#include <math.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline dim3 blockDim, gridDim;
constexpr int warpSize = 32;

// ---- 16-bit floating types ------------------------------------------------------------------
struct __half { std::uint16_t bits; };
struct __nv_bfloat16 { std::uint16_t bits; };

inline std::uint32_t nvm_emu_bits(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float nvm_emu_float(std::uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline __half __float2half_rn(float f) {
  const std::uint32_t x = nvm_emu_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};
  if (ax >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // rounds past 65504
  if (ax < 0x38800000u) {  // half subnormal or zero: the count of 2^-24 units, rounded to even
    return {static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(nvm_emu_float(ax) * 16777216.0f)))};
  }
  const std::uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
  return {static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
}

inline float __half2float(__half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (h.bits >> 10) & 0x1fu, mantissa = h.bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return nvm_emu_float(sign | 0x7f800000u | (mantissa << 13));
  return nvm_emu_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const std::uint32_t x = nvm_emu_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((x >> 16) | 0x40u)};
  return {static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
}

inline float __bfloat162float(__nv_bfloat16 b) { return nvm_emu_float(static_cast<std::uint32_t>(b.bits) << 16); }

// ---- math functions CUDA has and C++ lacks ----------------------------------------------------
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
using std::fma;

// ---- atomics ------------------------------------------------------------------------------------
inline unsigned long long atomicMax(unsigned long long* address, unsigned long long value) {
  unsigned long long old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (old < value && !__atomic_compare_exchange_n(address, &old, value, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}

// ---- the block's barrier ------------------------------------------------------------------------
class NvmEmuBarrier {
 public:
  explicit NvmEmuBarrier(unsigned count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const unsigned generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return generation != generation_; })) {
      std::fprintf(stderr, "cuda_emulation: __syncthreads timed out (divergent barrier?)\n");
      std::abort();
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const unsigned count_;
  unsigned waiting_ = 0, generation_ = 0;
};

inline NvmEmuBarrier* nvm_emu_barrier = nullptr;
inline void __syncthreads() { nvm_emu_barrier->wait(); }

// ---- warp-level matrix multiply: mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} ---------------
inline std::uint16_t __half_as_ushort(__half h) { return h.bits; }
inline std::uint16_t __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }

// The instruction as the PTX ISA lays out its fragments, from each lane's registers: lanes post
// their registers to the block, meet at a barrier, each computes its own four results from its
// warp's 32 lanes, and meet again before the registers are overwritten. Every thread of the block
// must call it the same number of times (the generated kernels do: the loops are block-uniform).
inline void nvm_emu_mma_m16n8k16(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                 unsigned b1, bool bf16) {
  static unsigned regs[1024][6];
  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned posted[6] = {a0, a1, a2, a3, b0, b1};
  for (int r = 0; r < 6; ++r) regs[tid][r] = posted[r];
  __syncthreads();
  auto value = [bf16](unsigned reg, int upper) {
    const std::uint16_t bits = static_cast<std::uint16_t>(upper ? reg >> 16 : reg & 0xffffu);
    return bf16 ? __bfloat162float(__nv_bfloat16{bits}) : __half2float(__half{bits});
  };
  float A[16][16], B[16][8];
  const unsigned warp0 = tid - tid % 32;
  for (int l = 0; l < 32; ++l) {
    const unsigned* r = regs[warp0 + l];
    const int g = l / 4, t2 = 2 * (l % 4);
    for (int e = 0; e < 2; ++e) {
      A[g][t2 + e] = value(r[0], e);
      A[g + 8][t2 + e] = value(r[1], e);
      A[g][t2 + 8 + e] = value(r[2], e);
      A[g + 8][t2 + 8 + e] = value(r[3], e);
      B[t2 + e][g] = value(r[4], e);
      B[t2 + 8 + e][g] = value(r[5], e);
    }
  }
  const int lane = tid % 32, g = lane / 4, t2 = 2 * (lane % 4);
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {t2, t2 + 1, t2, t2 + 1};
  for (int i = 0; i < 4; ++i) {
    float sum = d[i];
    for (int k = 0; k < 16; ++k) sum = std::fma(A[rows[i]][k], B[k][cols[i]], sum);
    d[i] = sum;
  }
  __syncthreads();
}

// ---- launch: cuLaunchKernel's argument array unpacked into a call -------------------------------
template <typename... A, std::size_t... I>
void nvm_emu_call(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_cv_t<A>*>(args[I])...);
}

template <typename... A>
void nvm_emu_launch(void (*kernel)(A...), dim3 grid, dim3 block, void** args) {
  gridDim = grid;
  blockDim = block;
  const unsigned threads = block.x * block.y * block.z, blocks = grid.x * grid.y * grid.z;
  NvmEmuBarrier barrier(threads);
  nvm_emu_barrier = &barrier;
  std::vector<std::thread> team;
  team.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    team.emplace_back([=, &barrier] {
      threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
      for (unsigned b = 0; b < blocks; ++b) {
        blockIdx = {b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y)};
        nvm_emu_call(kernel, args, std::index_sequence_for<A...>{});
        barrier.wait();
      }
    });
  }
  for (auto& thread : team) thread.join();
  nvm_emu_barrier = nullptr;
}
