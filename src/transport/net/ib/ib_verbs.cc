#include "transport/net/ib/ib_verbs.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "common/params.h"
#include "common/status.h"
#include "transport/net/ib/ib_emulation.h"

namespace weft::transport::ib {
namespace {

// verbs.h defines these inline, calling through the context's ops: they need
// no symbol from the library, but they must be functions to sit in the table.
int systemPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return ibv_post_send(qp, wr, bad); }
int systemPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(qp, wr, bad); }
int systemPollCq(ibv_cq* cq, int entries, ibv_wc* wc) { return ibv_poll_cq(cq, entries, wc); }

std::string systemPciPath(ibv_device* device) {
  char* path = realpath((std::string("/sys/class/infiniband/") + device->name + "/device").c_str(), nullptr);
  std::string out = path ? path : "";
  std::free(path);
  return out;
}

// Resolves `name` into `slot`; false (and the name in `missing`) when absent.
template <typename Fn>
bool resolve(void* handle, const char* name, Fn* slot, std::string* missing) {
  *slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*slot == nullptr && missing->empty()) *missing = name;
  return *slot != nullptr;
}

bool fillTable(void* handle, Verbs* v, std::string* missing) {
  resolve(handle, "ibv_get_device_list", &v->getDeviceList, missing);
  resolve(handle, "ibv_free_device_list", &v->freeDeviceList, missing);
  resolve(handle, "ibv_get_device_name", &v->getDeviceName, missing);
  resolve(handle, "ibv_open_device", &v->openDevice, missing);
  resolve(handle, "ibv_close_device", &v->closeDevice, missing);
  resolve(handle, "ibv_query_device", &v->queryDevice, missing);
  // The exported symbol fills the older, shorter port attributes (which hold
  // every field Weft reads); the header's inline wrapper is not used.
  resolve(handle, "ibv_query_port", &v->queryPort, missing);
  resolve(handle, "ibv_query_gid", &v->queryGid, missing);
  resolve(handle, "ibv_alloc_pd", &v->allocPd, missing);
  resolve(handle, "ibv_dealloc_pd", &v->deallocPd, missing);
  resolve(handle, "ibv_reg_mr", &v->regMr, missing);
  resolve(handle, "ibv_dereg_mr", &v->deregMr, missing);
  resolve(handle, "ibv_create_cq", &v->createCq, missing);
  resolve(handle, "ibv_destroy_cq", &v->destroyCq, missing);
  resolve(handle, "ibv_create_qp", &v->createQp, missing);
  resolve(handle, "ibv_modify_qp", &v->modifyQp, missing);
  resolve(handle, "ibv_destroy_qp", &v->destroyQp, missing);
  resolve(handle, "ibv_wc_status_str", &v->wcStatusStr, missing);
  std::string optional;
  resolve(handle, "ibv_reg_mr_iova2", &v->regMrIova2, &optional);
  resolve(handle, "ibv_reg_dmabuf_mr", &v->regDmabufMr, &optional);
  v->postSend = systemPostSend;
  v->postRecv = systemPostRecv;
  v->pollCq = systemPollCq;
  v->devicePciPath = systemPciPath;
  return missing->empty();
}

}  // namespace

const Verbs* loadSystemVerbs(std::string* why) {
  static std::once_flag once;
  static Verbs table{};
  static const Verbs* loaded = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    // RTLD_LOCAL: the library's symbols stay out of the global namespace, so
    // a user's own libibverbs (another version) cannot clash with it.
    void* handle = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      failure = strFormat("cannot load libibverbs.so.1 (%s)", error ? error : "unknown error");
      return;
    }
    table.source = "libibverbs.so.1";
    std::string missing;
    if (!fillTable(handle, &table, &missing)) {
      failure = strFormat("libibverbs.so.1 lacks %s", missing.c_str());
      return;  // the library stays loaded: unloading is not worth the risk
    }
    loaded = &table;
  });
  if (loaded == nullptr && why) *why = failure;
  return loaded;
}

const Verbs* verbs(std::string* why) {
  static std::once_flag once;
  static const Verbs* chosen = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    const int64_t emulated = param::ibEmulate();
    chosen = emulated > 0 ? emulationVerbs(static_cast<int>(emulated)) : loadSystemVerbs(&failure);
  });
  if (chosen == nullptr && why) *why = failure;
  return chosen;
}

}  // namespace weft::transport::ib
