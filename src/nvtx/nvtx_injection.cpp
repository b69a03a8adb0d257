// The NVTX injection entry point: fills the application's NVTX function
// tables with our handlers, which forward to nvtx_capture (nvtx_capture.h).
// Every handler is an exception firewall.
#include <nvtx3/nvToolsExt.h>

#include <cwchar>
#include <mutex>
#include <string>

#include "base/log.h"
#include "nvtx/nvtx_capture.h"

namespace twinscope {
namespace {

struct Domain {
  std::string name;
};

std::string Narrow(const wchar_t* w) {
  std::string s;
  if (!w) return s;
  for (; *w; ++w) s.push_back(*w < 128 ? static_cast<char>(*w) : '?');
  return s;
}

std::string_view DomainName(nvtxDomainHandle_t d) {
  return d ? std::string_view(reinterpret_cast<const Domain*>(d)->name) : std::string_view();
}

std::string Message(const nvtxEventAttributes_t* a) {
  if (!a) return {};
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE:
      return Narrow(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered ? *reinterpret_cast<const std::string*>(a->message.registered) : "";
    default:
      return {};
  }
}

// Core module.
void MarkEx(const nvtxEventAttributes_t* a) {
  Firewall("nvtxMarkEx", [&] { nvtx_capture::Mark("", Message(a)); });
}
void MarkA(const char* m) {
  Firewall("nvtxMarkA", [&] { nvtx_capture::Mark("", m ? m : ""); });
}
void MarkW(const wchar_t* m) {
  Firewall("nvtxMarkW", [&] { nvtx_capture::Mark("", Narrow(m)); });
}
nvtxRangeId_t RangeStartEx(const nvtxEventAttributes_t* a) {
  nvtxRangeId_t id = 0;
  Firewall("nvtxRangeStartEx", [&] { id = nvtx_capture::Start("", Message(a)); });
  return id;
}
nvtxRangeId_t RangeStartA(const char* m) {
  nvtxRangeId_t id = 0;
  Firewall("nvtxRangeStartA", [&] { id = nvtx_capture::Start("", m ? m : ""); });
  return id;
}
nvtxRangeId_t RangeStartW(const wchar_t* m) {
  nvtxRangeId_t id = 0;
  Firewall("nvtxRangeStartW", [&] { id = nvtx_capture::Start("", Narrow(m)); });
  return id;
}
void RangeEnd(nvtxRangeId_t id) {
  Firewall("nvtxRangeEnd", [&] { nvtx_capture::End(id); });
}
int RangePushEx(const nvtxEventAttributes_t* a) {
  Firewall("nvtxRangePushEx", [&] { nvtx_capture::Push("", Message(a)); });
  return 0;
}
int RangePushA(const char* m) {
  Firewall("nvtxRangePushA", [&] { nvtx_capture::Push("", m ? m : ""); });
  return 0;
}
int RangePushW(const wchar_t* m) {
  Firewall("nvtxRangePushW", [&] { nvtx_capture::Push("", Narrow(m)); });
  return 0;
}
int RangePop() {
  Firewall("nvtxRangePop", [&] { nvtx_capture::Pop(""); });
  return 0;
}

// Core2 module (domains).
void DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  Firewall("nvtxDomainMarkEx", [&] { nvtx_capture::Mark(DomainName(d), Message(a)); });
}
nvtxRangeId_t DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  nvtxRangeId_t id = 0;
  Firewall("nvtxDomainRangeStartEx", [&] { id = nvtx_capture::Start(DomainName(d), Message(a)); });
  return id;
}
void DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) {
  Firewall("nvtxDomainRangeEnd", [&] { nvtx_capture::End(id); });
}
int DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  Firewall("nvtxDomainRangePushEx", [&] { nvtx_capture::Push(DomainName(d), Message(a)); });
  return 0;
}
int DomainRangePop(nvtxDomainHandle_t d) {
  Firewall("nvtxDomainRangePop", [&] { nvtx_capture::Pop(DomainName(d)); });
  return 0;
}
nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  nvtxStringHandle_t h = nullptr;
  Firewall("nvtxDomainRegisterStringA",
           [&] { h = reinterpret_cast<nvtxStringHandle_t>(new std::string(s ? s : "")); });  // lives until exit
  return h;
}
nvtxStringHandle_t DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
  nvtxStringHandle_t h = nullptr;
  Firewall("nvtxDomainRegisterStringW", [&] { h = reinterpret_cast<nvtxStringHandle_t>(new std::string(Narrow(s))); });
  return h;
}
nvtxDomainHandle_t DomainCreateA(const char* name) {
  nvtxDomainHandle_t h = nullptr;
  Firewall("nvtxDomainCreateA",
           [&] { h = reinterpret_cast<nvtxDomainHandle_t>(new Domain{name ? name : ""}); });  // lives until exit
  return h;
}
nvtxDomainHandle_t DomainCreateW(const wchar_t* name) {
  nvtxDomainHandle_t h = nullptr;
  Firewall("nvtxDomainCreateW", [&] { h = reinterpret_cast<nvtxDomainHandle_t>(new Domain{Narrow(name)}); });
  return h;
}
void DomainDestroy(nvtxDomainHandle_t) {}  // handles stay valid: records may still name them

template <typename Fn>
void Install(NvtxFunctionTable table, unsigned size, unsigned cbid, Fn fn) {
  if (table && cbid < size && table[cbid]) *table[cbid] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

int Initialize(NvtxGetExportTableFunc_t get_export_table) {
  auto* etbl = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!etbl || etbl->struct_size < sizeof(NvtxExportTableCallbacks) || !etbl->GetModuleFunctionTable) return 0;
  NvtxFunctionTable t = nullptr;
  unsigned n = 0;
  if (etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n)) {
    Install(t, n, NVTX_CBID_CORE_MarkEx, &MarkEx);
    Install(t, n, NVTX_CBID_CORE_MarkA, &MarkA);
    Install(t, n, NVTX_CBID_CORE_MarkW, &MarkW);
    Install(t, n, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
    Install(t, n, NVTX_CBID_CORE_RangeStartA, &RangeStartA);
    Install(t, n, NVTX_CBID_CORE_RangeStartW, &RangeStartW);
    Install(t, n, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
    Install(t, n, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
    Install(t, n, NVTX_CBID_CORE_RangePushA, &RangePushA);
    Install(t, n, NVTX_CBID_CORE_RangePushW, &RangePushW);
    Install(t, n, NVTX_CBID_CORE_RangePop, &RangePop);
  }
  if (etbl->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n)) {
    Install(t, n, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
    Install(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
    Install(t, n, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
    Install(t, n, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
    Install(t, n, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
    Install(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
    Install(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, &DomainRegisterStringW);
    Install(t, n, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
    Install(t, n, NVTX_CBID_CORE2_DomainCreateW, &DomainCreateW);
    Install(t, n, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
  }
  return 1;
}

}  // namespace
}  // namespace twinscope

// Called by the NVTX loader in the application (NVTX_INJECTION64_PATH).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  int ok = 0;
  twinscope::Firewall("InitializeInjectionNvtx2", [&] { ok = twinscope::Initialize(get); });
  return ok;
}
