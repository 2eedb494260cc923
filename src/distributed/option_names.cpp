// Names of the distributed enums (declared with them in <dash/distributed.h>).

#include <dash/distributed.h>

#include "common/name_table.h"

#include <string>

namespace dash {
namespace {

const common::NameTable<CommunicationDtype> kCommunicationDtypes = {
    {"fp32", CommunicationDtype::FP32},
    {"bf16", CommunicationDtype::BF16},
    {"fp16", CommunicationDtype::FP16},
};

const common::NameTable<DistributionScheme> kDistributionSchemes = {
    {"replicated", DistributionScheme::Replicated},
    {"zero", DistributionScheme::Zero},
    {"local_shards", DistributionScheme::LocalShards},
};

}  // namespace

std::string to_string(CommunicationDtype dtype) { return common::name_of(kCommunicationDtypes, dtype); }
CommunicationDtype parse_communication_dtype(const std::string& name) {
  return common::parse(kCommunicationDtypes, name, "communication dtype");
}

std::string to_string(DistributionScheme scheme) { return common::name_of(kDistributionSchemes, scheme); }
DistributionScheme parse_distribution_scheme(const std::string& name) {
  return common::parse(kDistributionSchemes, name, "distribution scheme");
}

}  // namespace dash
