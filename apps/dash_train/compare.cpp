#include "compare.h"

#include "file_io.h"
#include "optimizer_factory.h"
#include "run_folder.h"
#include "text_corpus.h"
#include "trainer.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace dash_train {
namespace {

struct Statistics {
  double mean = 0.0, std = 0.0;
};

/// Sample mean and (n − 1) standard deviation; std 0 for one value.
Statistics statistics(const std::vector<double>& values) {
  Statistics result;
  for (const double value : values) result.mean += value;
  result.mean /= static_cast<double>(values.size());
  if (values.size() > 1) {
    for (const double value : values) result.std += (value - result.mean) * (value - result.mean);
    result.std = std::sqrt(result.std / static_cast<double>(values.size() - 1));
  }
  return result;
}

std::string lr_label(double lr) {
  std::ostringstream text;
  text << lr;
  return text.str();
}

struct Variant {
  std::string name;
  nlohmann::json keys;
  double lr = 0.0;
};

std::vector<Variant> variants(const CompareOptions& options) {
  TORCH_CHECK(options.runs.is_array() && !options.runs.empty(),
      "dash-train compare: the runs must be a non-empty JSON array of objects");
  std::vector<Variant> result;
  for (const auto& run : options.runs) {
    TORCH_CHECK(run.is_object() && run.contains("name") && run["name"].is_string(),
        "dash-train compare: every run needs a \"name\" string, got ", run.dump());
    auto keys = run;
    keys.erase("name");
    for (const char* shared : {"data", "validation_fraction", "out_dir", "seed", "resume", "stop_at", "nproc"}) {
      TORCH_CHECK(!keys.contains(shared), "dash-train compare: run '", run["name"].get<std::string>(), "' sets '",
          shared, "'; it is shared by all runs: set it on the command line or in --config");
    }
    if (options.lrs.empty()) {
      TrainConfig probe = options.base;
      apply_json(probe, keys, "run '" + run["name"].get<std::string>() + "'");
      result.push_back({run["name"].get<std::string>(), keys, probe.lr});
    } else {
      for (const double lr : options.lrs) {
        auto with_lr = keys;
        with_lr["lr"] = lr;
        result.push_back({run["name"].get<std::string>() + "@lr" + lr_label(lr), with_lr, lr});
      }
    }
  }
  return result;
}

// Every run's configuration, per variant and seed, checked before the first run
// starts: its keys, its optimizer's options (by building the optimizer for a probe
// parameter) and its folder (unique, and free unless --resume / --overwrite).
std::vector<std::vector<TrainConfig>> checked_configs(const CompareOptions& options, const std::vector<Variant>& runs) {
  std::vector<std::vector<TrainConfig>> configs;
  std::set<std::string> folders;
  const auto probe = at::zeros({2, 2}).set_requires_grad(true);
  for (const auto& run : runs) {
    configs.emplace_back();
    for (const int64_t seed : options.seeds) {
      TrainConfig config = options.base;
      apply_json(config, run.keys, "run '" + run.name + "'");
      config.seed = seed;
      config.name = run.name + "-seed" + std::to_string(seed);
      try {
        config.check();
        (void)make_optimizer(config, {probe});
      } catch (const c10::Error& error) {
        TORCH_CHECK(false, "dash-train compare: run '", run.name, "': ", error.what_without_backtrace());
      }
      TORCH_CHECK(folders.insert(config.run_dir()).second, "dash-train compare: two runs would write to '",
          config.run_dir(), "'; give each run its own name");
      check_run_folder(config.run_dir(), folder_use(config));
      configs.back().push_back(config);
    }
  }
  return configs;
}

// Validation losses of one run at one step, over its seeds, and the training time
// each seed had taken to get there.
struct CurvePoint {
  std::vector<double> losses;
  std::vector<double> train_seconds;
};

// Two plots of the same curves.dat (columns: step, mean loss, mean training
// seconds): loss against steps, and loss against wall-clock training time, which
// is how the paper's "same quality in less time" shows.
void write_plot(const std::string& out_dir, const std::vector<CompareRow>& rows,
    const std::vector<std::map<int64_t, CurvePoint>>& curves, const std::string& gnuplot) {
  std::ofstream data(out_dir + "/curves.dat");
  std::ofstream script(out_dir + "/validation_loss.gp");
  auto add_plot = [&](const std::string& png, const std::string& x_label, int x_column) {
    script << "set output '" << out_dir << "/" << png << "'\nset xlabel '" << x_label << "'\nplot ";
    for (size_t i = 0; i < rows.size(); ++i) {
      script << (i ? ", \\\n     " : "") << "'" << out_dir << "/curves.dat' index " << i << " using " << x_column
             << ":2 with linespoints title '" << rows[i].name << "'";
    }
    script << '\n';
  };
  script << "set terminal pngcairo size 900,600\nset title 'dash-train: validation loss (mean over seeds)'\n"
         << "set ylabel 'validation loss (nats per byte)'\nset key top right\nset grid\n";
  add_plot("validation_loss.png", "step", 1);
  add_plot("validation_loss_time.png", "training time, s (forward, backward and optimizer; no validation)", 3);
  for (size_t i = 0; i < rows.size(); ++i) {
    data << "# " << rows[i].name << "\n";
    for (const auto& [step, point] : curves[i]) {
      data << step << ' ' << statistics(point.losses).mean << ' ' << statistics(point.train_seconds).mean << '\n';
    }
    data << "\n\n";
  }
  data.close();
  script.close();
  const std::string command = "command -v " + gnuplot + " >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::cerr << "dash-train compare: '" << gnuplot << "' not found, plot skipped (Debian: gnuplot-nox); the data is "
              << out_dir << "/curves.dat\n";
    return;
  }
  const std::string plot = gnuplot + " '" + out_dir + "/validation_loss.gp'";
  if (std::system(plot.c_str()) != 0) {
    std::cerr << "dash-train compare: gnuplot failed; the script is " << out_dir << "/validation_loss.gp\n";
  }
}

}  // namespace

nlohmann::json default_comparison_runs() {
  return nlohmann::json::parse(R"([
    {"name": "adamw",        "optimizer": "adamw", "lr": 3e-3},
    {"name": "dash-evd",     "optimizer": "dash",  "lr": 1e-2, "root_method": "evd"},
    {"name": "dash-ndb-fro", "optimizer": "dash",  "lr": 3e-3, "root_method": "ndb", "scaling": "fro"},
    {"name": "dash-ndb-pi",  "optimizer": "dash",  "lr": 3e-3, "root_method": "ndb", "scaling": "multi-pi"},
    {"name": "dash-cn",      "optimizer": "dash",  "lr": 3e-3, "root_method": "cn",  "scaling": "multi-pi"}
  ])");
}

std::vector<CompareRow> run_comparison(const CompareOptions& options) {
  TORCH_CHECK(!options.seeds.empty(), "dash-train compare: --seeds must name at least one seed");
  const auto runs = variants(options);
  options.base.check();
  const auto configs = checked_configs(options, runs);
  const auto corpus = load_text_corpus(options.base.data.empty() ? kDefaultCorpusPath : options.base.data,
      options.base.validation_fraction, options.base.seq_len + 1);
  const std::string out_dir = options.base.out_dir;
  std::filesystem::create_directories(out_dir);

  std::vector<CompareRow> rows;
  std::vector<std::map<int64_t, CurvePoint>> curves;
  const size_t total = runs.size() * options.seeds.size();
  size_t index = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const auto& run = runs[r];
    CompareRow row;
    row.name = run.name;
    row.lr = run.lr;
    std::vector<double> losses, perplexities, optimizer_ms, step_ms, tokens_per_second;
    std::map<int64_t, CurvePoint> curve;
    for (const auto& config : configs[r]) {
      std::cerr << "[" << ++index << "/" << total << "] " << config.name << " (" << config.optimizer << ", lr "
                << config.lr << ")\n";
      const auto result = Trainer(config, corpus).run();
      losses.push_back(result.final_validation_loss);
      perplexities.push_back(std::exp(result.final_validation_loss));
      optimizer_ms.push_back(result.optimizer_ms);
      step_ms.push_back(result.forward_ms + result.backward_ms + result.optimizer_ms);
      tokens_per_second.push_back(result.tokens_per_second);
      for (const auto& point : result.validation) {
        curve[point.step].losses.push_back(point.loss);
        curve[point.step].train_seconds.push_back(point.train_seconds);
      }
      std::cerr << "    validation loss " << result.final_validation_loss << ", perplexity "
                << std::exp(result.final_validation_loss) << ", optimizer step " << result.optimizer_ms << " ms\n";
    }
    const auto loss = statistics(losses);
    const auto perplexity = statistics(perplexities);
    row.seeds = static_cast<int64_t>(options.seeds.size());
    row.loss_mean = loss.mean;
    row.loss_std = loss.std;
    row.perplexity_mean = perplexity.mean;
    row.perplexity_std = perplexity.std;
    row.optimizer_ms = statistics(optimizer_ms).mean;
    row.step_ms = statistics(step_ms).mean;
    row.tokens_per_second = statistics(tokens_per_second).mean;
    rows.push_back(row);
    curves.push_back(curve);
  }

  write_file_atomically(out_dir + "/summary.md", comparison_table(rows));
  auto summary = nlohmann::json::array();
  for (const auto& row : rows) {
    summary.push_back(
        {{"name", row.name}, {"lr", row.lr}, {"seeds", row.seeds}, {"validation_loss_mean", row.loss_mean},
            {"validation_loss_std", row.loss_std}, {"validation_perplexity_mean", row.perplexity_mean},
            {"validation_perplexity_std", row.perplexity_std}, {"optimizer_step_ms", row.optimizer_ms},
            {"train_step_ms", row.step_ms}, {"tokens_per_second", row.tokens_per_second}});
  }
  write_file_atomically(out_dir + "/summary.json", summary.dump(2) + "\n");
  write_plot(out_dir, rows, curves, options.plot_gnuplot);
  return rows;
}

std::string comparison_table(const std::vector<CompareRow>& rows) {
  std::ostringstream table;
  table << "| run | lr | seeds | val. loss (nats/byte) | val. perplexity (per byte) | optimizer step, ms | "
           "train step, ms | tokens/s |\n|---|---|---|---|---|---|---|---|\n";
  table << std::fixed;
  for (const auto& row : rows) {
    table << "| " << row.name << " | " << lr_label(row.lr) << " | " << row.seeds << " | " << std::setprecision(4)
          << row.loss_mean << " ± " << row.loss_std << " | " << row.perplexity_mean << " ± " << row.perplexity_std
          << " | " << std::setprecision(1) << row.optimizer_ms << " | " << row.step_ms << " | " << std::setprecision(0)
          << row.tokens_per_second << " |\n";
  }
  return table.str();
}

}  // namespace dash_train
