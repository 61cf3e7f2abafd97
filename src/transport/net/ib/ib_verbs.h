// The verbs the IB network uses, as ONE table of function pointers. Nothing
// else in Weft calls an ibv_* function: the table is filled either from
// libibverbs (dlopen'ed at run time, so a machine without rdma-core still
// runs) or from the in-process emulation (ib_emulation.h), which tests select
// with WEFT_IB_EMULATE. verbs.h is included for its types only; the verbs it
// defines inline (post_send, post_recv, poll_cq go through ctx->ops) are
// wrapped here so that the emulation can replace them too.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace weft::transport::ib {

struct Verbs {
  const char* source;  // "libibverbs.so.1" or "emulation", for messages
  ibv_device** (*getDeviceList)(int* count);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* device);
  ibv_context* (*openDevice)(ibv_device* device);
  int (*closeDevice)(ibv_context* context);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  int (*queryPort)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int vector);
  int (*destroyCq)(ibv_cq* cq);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
  int (*pollCq)(ibv_cq* cq, int entries, ibv_wc* wc);
  const char* (*wcStatusStr)(ibv_wc_status status);
  // Registration with relaxed PCI ordering allowed (ibv_reg_mr_iova2 takes
  // the optional access flag); null when the library predates it.
  ibv_mr* (*regMrIova2)(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
  // Registration of a dma-buf (GPU memory a driver exported as a file
  // descriptor): bytes [offset, offset+length) of `fd`, addressed by work
  // requests as [iova, iova+length). Null when the library predates
  // ibv_reg_dmabuf_mr (rdma-core before v34): GPUDirect RDMA is then off.
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
  // The sysfs path of the device's PCI function (the realpath of
  // /sys/class/infiniband/<name>/device); empty when it has none. Not a
  // libibverbs call: the probe asks here so that the emulation can answer.
  std::string (*devicePciPath)(ibv_device* device);
};

// The table in use: the emulation when WEFT_IB_EMULATE > 0, else
// libibverbs; null when neither can be had (`why` then says why). Decided
// once per process.
const Verbs* verbs(std::string* why);

// libibverbs' table, loaded with dlopen (exposed for the probe test); null
// with the reason in `why` when the library or one of its symbols is absent.
const Verbs* loadSystemVerbs(std::string* why);

}  // namespace weft::transport::ib
