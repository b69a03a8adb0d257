#include "probe/probe_experiments.h"

namespace twinscope::probe {

const std::vector<Experiment>& Experiments() {
  static const std::vector<Experiment> kAll = {
      {"sanitizer_alone", "sanitizerSubscribe", {"san_subscribe"}, true, false},
      {"cupti_activity_alone", "CUPTI activity", {"cupti_activity_register", "cupti_activity_enable"}, false, true},
      {"sanitizer_then_cupti_activity",
       "sanitizerSubscribe, then CUPTI activity",
       {"san_subscribe", "cupti_activity_register", "cupti_activity_enable"},
       true,
       true},
      {"sanitizer_then_cupti_subscribe",
       "sanitizerSubscribe, then cuptiSubscribe",
       {"san_subscribe", "cupti_subscribe"},
       true,
       true},
      {"cupti_activity_then_sanitizer",
       "CUPTI activity, then sanitizerSubscribe",
       {"cupti_activity_register", "cupti_activity_enable", "san_subscribe"},
       true,
       true},
      {"cupti_subscribe_then_sanitizer",
       "cuptiSubscribe, then sanitizerSubscribe",
       {"cupti_subscribe", "san_subscribe"},
       true,
       true},
      {"sanitizer_unsubscribe_then_cupti",
       "sanitizerSubscribe, sanitizerUnsubscribe, then CUPTI activity",
       {"san_subscribe", "san_unsubscribe", "cupti_activity_register", "cupti_activity_enable"},
       true,
       true},
      {"cupti_unsubscribe_then_sanitizer",
       "cuptiSubscribe, cuptiUnsubscribe, then sanitizerSubscribe",
       {"cupti_subscribe", "cupti_unsubscribe", "san_subscribe"},
       true,
       true},
      {"cupti_finalize_then_sanitizer",
       "CUPTI activity, cuptiFinalize, then sanitizerSubscribe",
       {"cupti_activity_register", "cupti_activity_enable", "cupti_finalize", "san_subscribe"},
       true,
       true},
      {"cupti_finalize_then_cupti",
       "cuptiSubscribe, cuptiFinalize, cuptiSubscribe",
       {"cupti_subscribe", "cupti_finalize", "cupti_subscribe"},
       false,
       true},
      // CUPTI 13.5's multi-subscriber mode (the v2 ops need 13.5).
      {"cupti_v2_two_subscribers",
       "cuptiSubscribe_v2 (multi) A, then B",
       {"cupti_v2_a", "cupti_v2_b"},
       false,
       true,
       true},
      {"cupti_v2_then_v1",
       "cuptiSubscribe_v2 (multi), then legacy CUPTI activity + cuptiSubscribe",
       {"cupti_v2_a", "cupti_activity_register", "cupti_activity_enable", "cupti_subscribe"},
       false,
       true,
       true},
      {"cupti_v1_then_v2",
       "legacy CUPTI activity + cuptiSubscribe, then cuptiSubscribe_v2 (multi)",
       {"cupti_activity_register", "cupti_activity_enable", "cupti_subscribe", "cupti_v2_a"},
       false,
       true,
       true},
      {"cupti_v2_then_sanitizer",
       "cuptiSubscribe_v2 (multi), then sanitizerSubscribe",
       {"cupti_v2_a", "san_subscribe"},
       true,
       true},
      {"sanitizer_then_cupti_v2",
       "sanitizerSubscribe, then cuptiSubscribe_v2 (multi)",
       {"san_subscribe", "cupti_v2_a"},
       true,
       true},
  };
  return kAll;
}

const Experiment* FindExperiment(const std::string& id) {
  for (const Experiment& e : Experiments())
    if (e.id == id) return &e;
  return nullptr;
}

}  // namespace twinscope::probe
