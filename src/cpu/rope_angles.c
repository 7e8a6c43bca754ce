/*
 * rope_angles.c — the scalar pieces of the rotation that the rope kernels
 * (cpu/rope_impl.h) and the flash kernels (a tile rotated as it loads) call,
 * and that the core's tables and reference call too: so both form the
 * same numbers.  Built with the library's flags (no FMA contraction), not
 * a kernel's.
 */
#include <math.h>

#include "cpu/kernels.h"
#include "cpu/rope_job.h"

void ra_rope_angles(const ra_rope *rope, int64_t pos, int64_t first, int64_t n, float *cos_out,
                    float *sin_out)
{
    const double af = rope->attention_factor;
    for (int64_t i = 0; i < n; i++) {
        double angle = (double)pos * rope->inv_freq[first + i];
        cos_out[i] = (float)(cos(angle) * af);
        sin_out[i] = (float)(sin(angle) * af);
    }
}

void ra_rope_mrope_row(const ra_rope *rope, const int64_t pos[3], int64_t first, int64_t n,
                       float *cos_out, float *sin_out)
{
    for (int64_t j = 0; j < n; j++) {
        const int64_t i = first + j, m = pos[rope->component[i]];
        if (m < rope->config.table_size) {
            cos_out[j] = rope->cos[ra_rope_table_row(rope, m) + i];
            sin_out[j] = rope->sin[ra_rope_table_row(rope, m) + i];
        } else {
            ra_rope_angles(rope, m, i, 1, cos_out + j, sin_out + j);
        }
    }
}

int64_t ra_position_sequence(const ra_positions *p, int64_t t)
{
    if (p->axial_ids || p->mrope_ids || p->ids || !p->cu_seqlens) return 0;
    int64_t lo = 0, hi = p->n_seqs - 1; /* the last i with cu_seqlens[i] <= t */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (p->cu_seqlens[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void ra_rope_rows(const ra_rope *rope, const ra_tensor *out, const ra_tensor *x,
                  const ra_positions *positions)
{
    ra_rope_job job = {rope, out, x, positions, 1.0f, x->shape[0] * x->shape[1]};
    ra_kernels_get()->rope_task(&job, 0, 0);
}
