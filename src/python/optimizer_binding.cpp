// dash._C.Optimizer: dash::Dash for the Python package. The Python class
// dash.Dash owns the param groups (torch.optim's source of truth) and passes each
// group's options to step(); everything else is the C++ optimizer's.

#include "python/bindings.h"
#include "python/option_dict.h"
#include "python/value_errors.h"

#include "distributed/c10d_compat.h"
#include "optim/diagnostics_fields.h"

#include <dash/distributed.h>
#include <dash/option_names.h>
#include <dash/optimizer.h>

#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>
#include <torch/serialize/archive.h>

#include <chrono>
#include <map>
#include <optional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace dash::python {
namespace {

torch::optim::OptimizerParamGroup param_group(std::vector<at::Tensor> params, const py::dict& options) {
  return torch::optim::OptimizerParamGroup(
      std::move(params), std::make_unique<DashOptions>(dash_options_from(options, /*ignore_unknown=*/true)));
}

// A torch.distributed process group as the C++ group it wraps. This needs the
// extension and torch to share pybind11's type registry (same pybind11 ABI): a
// torch built elsewhere may not, and then the error says so.
// `timeout_seconds`: each collective's (DistributedOptions::timeout); 0: its default.
std::shared_ptr<const DistributedContext> distributed_context(const py::object& process_group,
    const std::string& device_type, const std::string& communication_dtype, const std::string& scheme,
    double timeout_seconds) {
  DistributedOptions options;
  if (timeout_seconds != 0.0) {
    if (!(timeout_seconds >= 0.001 && timeout_seconds <= 1e9))
      throw py::value_error(
          "dash.Dash: timeout must be between 1 ms and 1e9 s, got " + std::to_string(timeout_seconds));
    options.timeout(std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0)));
  }
  options.communication_dtype(as_value_error(
      [&] { return parse_communication_dtype(communication_dtype); }, "dash.Dash: communication_dtype: "));
  options.scheme(as_value_error([&] { return parse_distribution_scheme(scheme); }, "dash.Dash: scheme: "));
  if (process_group.is_none()) return nullptr;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  try {
    group = process_group.cast<c10::intrusive_ptr<c10d::ProcessGroup>>();
  } catch (const py::cast_error&) {
    throw py::type_error(
        "dash.Dash: process_group " + py::repr(process_group).cast<std::string>() +
        " is not a c10d ProcessGroup this build of dash can use (torch and dash must be built with the same "
        "pybind11 ABI; see docs/python.md)");
  }
  return std::make_shared<DistributedContext>(compat::backend_for(group, c10::Device(device_type).type()), options);
}

// A diagnostics field as Python has it: enums by name, trials as a list of dicts.
template <typename Value>
py::object diagnostic_value(const Value& value) {
  if constexpr (std::is_enum_v<Value>) {
    return py::str(to_string(value));
  } else if constexpr (std::is_same_v<Value, std::vector<RootMethodTrial>>) {
    return trials_list(value);
  } else {
    return py::cast(value);
  }
}

py::dict diagnostics_dict(const Dash& optimizer) {
  DashDiagnostics diagnostics;
  int64_t communicated = 0;
  {
    py::gil_scoped_release release;
    diagnostics = optimizer.diagnostics();
    communicated = optimizer.communicated_bytes_per_step();
  }
  // Every field of the structs, by the lists of optim/diagnostics_fields.h.
#define DASH_TO_PYTHON(name, type) entry[#name] = diagnostic_value(stack.name);
  py::list factor_stacks;
  for (const auto& stack : diagnostics.factor_stacks) {
    py::dict entry;
    DASH_FACTOR_STACK_DIAGNOSTICS(DASH_TO_PYTHON)
    factor_stacks.append(entry);
  }
  py::list block_stacks;
  for (const auto& stack : diagnostics.block_stacks) {
    py::dict entry;
    DASH_BLOCK_STACK_DIAGNOSTICS(DASH_TO_PYTHON)
    entry["shape"] = py::make_tuple(stack.count, stack.rows, stack.cols);
    block_stacks.append(entry);
  }
#undef DASH_TO_PYTHON
  py::dict result;
  result["factor_stacks"] = factor_stacks;
  result["block_stacks"] = block_stacks;
#define DASH_TO_PYTHON(name, type) result[#name] = diagnostic_value(diagnostics.name);
  DASH_DIAGNOSTICS(DASH_TO_PYTHON)
#undef DASH_TO_PYTHON
  result["communicated_bytes_per_step"] = communicated;
  return result;
}

py::bytes save_to_bytes(const Dash& optimizer) {
  std::ostringstream stream;
  {
    py::gil_scoped_release release;
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to(stream);
  }
  return py::bytes(stream.str());
}

torch::serialize::InputArchive archive_from_bytes(const py::bytes& data) {
  const std::string bytes = data;
  torch::serialize::InputArchive archive;
  as_value_error([&] { archive.load_from(bytes.data(), bytes.size()); },
      "dash.Dash: the state dict's optimizer state is not a dash checkpoint: ");
  return archive;
}

void load_from_bytes(Dash& optimizer, const py::bytes& data) {
  auto archive = archive_from_bytes(data);
  py::gil_scoped_release release;
  optimizer.load(archive);
}

// Every rank's archive of a checkpoint written on any number of ranks.
void load_resharded_from_bytes(Dash& optimizer, const std::vector<py::bytes>& shards) {
  std::vector<torch::serialize::InputArchive> archives;
  for (const auto& shard : shards) archives.push_back(archive_from_bytes(shard));
  py::gil_scoped_release release;
  optimizer.load_resharded(archives);
}

// Every parameter's state (name → tensor dicts, in parameter order) with the groups'
// options (dicts of C++ option names) and the counters (steps taken, skipped, skipped
// for overflow).
void load_parameter_states(Dash& optimizer, const py::list& group_options,
    const std::vector<std::map<std::string, at::Tensor>>& states, const std::tuple<int64_t, int64_t, int64_t>& counts) {
  std::vector<DashOptions> options;
  for (const auto& group : group_options) options.push_back(dash_options_from(group.cast<py::dict>(), false));
  std::vector<ParameterState> entries;
  for (const auto& state : states) entries.emplace_back(state.begin(), state.end());
  py::gil_scoped_release release;
  optimizer.load_parameter_states(options, entries, {std::get<0>(counts), std::get<1>(counts), std::get<2>(counts)});
}

// The optimizer's calls take its lock (<dash/optimizer.h>); they wait for it
// without the GIL, so that the thread holding it can finish its step.
// `group_changes`: per group, the options changed since the last step (Python's
// mirror, dash.Dash.step, sends only those): a group without changes is neither
// converted nor checked again. `gradients`: every parameter's .grad (None: none),
// read by Python under the GIL: the step never reads a parameter's gradient
// itself, which another Python thread may replace (or free) while this one steps
// without the GIL.
void step(Dash& optimizer, const py::list& group_changes, const py::list& gradients) {
  const auto& groups = optimizer.param_groups();
  TORCH_CHECK_VALUE(py::len(group_changes) == groups.size(), "dash.Dash: ", py::len(group_changes),
      " option dicts for ", groups.size(), " param groups");
  // All changed groups are converted (and checked) before any is changed; the swap
  // itself happens under the step's lock (step_with_options).
  std::vector<std::optional<DashOptions>> options(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto changes = group_changes[g].cast<py::dict>();
    if (changes.empty()) continue;
    try {
      options[g] =
          dash_options_from(changes, /*ignore_unknown=*/true, static_cast<const DashOptions&>(groups[g].options()));
    } catch (const py::value_error& error) {
      throw py::value_error("dash.Dash.step: param group " + std::to_string(g) + ": " + error.what());
    }
  }
  std::vector<at::Tensor> grads;
  grads.reserve(py::len(gradients));
  for (const auto& gradient : gradients)
    grads.push_back(gradient.is_none() ? at::Tensor() : gradient.cast<at::Tensor>());
  torch::PyWarningHandler warnings_to_python;  // TORCH_WARN (a skipped step) as a Python warning
  try {
    py::gil_scoped_release release;
    optimizer.step_with_options(std::move(options), std::move(grads));
  } catch (...) {
    warnings_to_python.set_in_exception();  // the error wins over buffered warnings
    throw;
  }
}

}  // namespace

void bind_optimizer(py::module_& module) {
  py::class_<Dash>(module, "Optimizer")
      .def(py::init([](const std::vector<std::pair<std::vector<at::Tensor>, py::dict>>& groups,
                        const py::object& process_group, const std::string& device_type,
                        const std::string& communication_dtype, const std::string& scheme, double timeout) {
        std::vector<torch::optim::OptimizerParamGroup> param_groups;
        for (const auto& [params, options] : groups) param_groups.push_back(param_group(params, options));
        auto context = distributed_context(process_group, device_type, communication_dtype, scheme, timeout);
        // Construction runs a collective (the ranks' agreement): without the GIL, as
        // step() does, so that a collective in flight whose completion runs Python
        // (DTensor's) can finish.
        py::gil_scoped_release release;
        return std::make_unique<Dash>(std::move(param_groups), DashOptions(), std::move(context));
      }),
          py::arg("groups"), py::arg("process_group") = py::none(), py::arg("device_type") = "cpu",
          py::arg("communication_dtype") = "fp32", py::arg("scheme") = "replicated", py::arg("timeout") = 0.0)
      .def("add_param_group",
          [](Dash& optimizer, std::vector<at::Tensor> params, const py::dict& options) {
            auto group = param_group(std::move(params), options);
            py::gil_scoped_release release;
            optimizer.add_param_group(group);
          })
      .def("step", &step, py::arg("group_changes"), py::arg("gradients"))
      .def("option_updates", &Dash::option_updates)
      .def("group_options",
          [](const Dash& optimizer, size_t g) {
            TORCH_CHECK_INDEX(g < optimizer.param_groups().size(), "dash.Dash: no param group ", g);
            return to_dict(static_cast<const DashOptions&>(optimizer.param_groups()[g].options()));
          })
      .def("save", &save_to_bytes)
      .def("load", &load_from_bytes)
      .def("load_resharded", &load_resharded_from_bytes)
      .def("load_parameter_states", &load_parameter_states, py::arg("group_options"), py::arg("states"),
          py::arg("counts"))
      .def("parameter_state",
          [](const Dash& optimizer, size_t index) {
            ParameterState entries;
            {
              py::gil_scoped_release release;
              entries = optimizer.parameter_state(index);
            }
            py::dict state;
            for (const auto& [name, tensor] : entries) state[py::str(name)] = tensor;
            return state;
          })
      .def("diagnostics", &diagnostics_dict)
      .def("profile_phases", &Dash::profile_phases)
      .def("profile_memory", &Dash::profile_memory)
      .def("phase_times_ms", &Dash::phase_times_ms);
}

}  // namespace dash::python
