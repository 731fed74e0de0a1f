// The device buffers the dense and the serving runners allocate alike, and
// the fmha_tensors pointing into them (private to tests/support).
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fmha/fmha.h"
#include "fmha_test/buffers.h"
#include "fmha_test/half.h"

namespace fmha_test {

// Allocates Q, K, V (`v_elems` elements) and O with guard bands and uploads
// the inputs; LSE and sinks only where the case has them.
// Data: CaseData or ServingData (their layouts, host inputs and buffers).
template <typename Data>
void allocate_attention_buffers(Data &data, size_t v_elems) {
    data.q = DeviceBuffer(data.q_layout.alloc_elems, 2, kGuard16);
    data.k = DeviceBuffer(data.k_layout.alloc_elems, 2, kGuard16);
    data.v = DeviceBuffer(v_elems, 2, kGuard16);
    data.o = DeviceBuffer(data.o_layout.alloc_elems, 2, kGuard16);
    data.q.upload(data.host_q().data());
    data.k.upload(data.host_k().data());
    data.v.upload(data.host_v().data());
    if (data.config().write_lse) data.lse = DeviceBuffer(data.lse_elems(), 4, kGuard32);
    if (data.config().sinks) {
        data.sinks = DeviceBuffer(data.host_sinks().size(), 4, kGuard32);
        data.sinks.upload(data.host_sinks().data());
    }
}

// fmha_tensors (this version) with Q, K, V (at `v_offset`), O, and LSE and
// sinks where the case has them; the serving runner adds its index arrays.
template <typename Data>
fmha_tensors attention_tensors(const Data &data, int64_t v_offset) {
    fmha_tensors t;
    if (fmha_tensors_init(&t, FMHA_TENSORS_VERSION) != FMHA_STATUS_SUCCESS)
        throw std::runtime_error(std::string("fmha_tensors_init: ") + fmha_last_error_message());
    t.q = static_cast<const uint16_t *>(data.q.data()) + data.q_layout.offset;
    t.k = static_cast<const uint16_t *>(data.k.data()) + data.k_layout.offset;
    t.v = static_cast<const uint16_t *>(data.v.data()) + v_offset;
    t.o = static_cast<uint16_t *>(data.o.data()) + data.o_layout.offset;
    t.lse = data.config().write_lse ? static_cast<float *>(data.lse.data()) : nullptr;
    t.sinks = data.config().sinks ? static_cast<const float *>(data.sinks.data()) : nullptr;
    return t;
}

}  // namespace fmha_test
