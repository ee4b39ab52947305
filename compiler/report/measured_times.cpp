#include "report/measured_times.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace llmc {

std::map<int, double> readMeasuredKernelSeconds(const std::string& path, const std::vector<PlannedKernel>& kernels) {
  std::ifstream in(path);
  if (!in) throw MeasurementError(fmt::format("{}: cannot open the measurement file", path));
  nlohmann::json rows;
  try {
    rows = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw MeasurementError(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  if (!rows.is_array())
    throw MeasurementError(fmt::format("{}: expected an array of launches (step_kernels_bench --json)", path));
  std::map<int, const PlannedKernel*> byId;
  for (const PlannedKernel& k : kernels) byId[k.kernel.id] = &k;
  std::map<int, double> seconds;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    auto field = [&](const char* name, nlohmann::json::value_t type) -> const nlohmann::json& {
      if (!row.is_object() || !row.contains(name))
        throw MeasurementError(fmt::format("{}: launch {}: no field '{}'", path, i, name));
      const nlohmann::json& v = row.at(name);
      const bool ok = type == nlohmann::json::value_t::number_float ? v.is_number() : v.type() == type ||
                      (type == nlohmann::json::value_t::number_integer && v.is_number_unsigned());
      if (!ok) throw MeasurementError(fmt::format("{}: launch {}: field '{}' has the wrong type", path, i, name));
      return v;
    };
    const std::string launch = field("launch", nlohmann::json::value_t::string).get<std::string>();
    const int kernel = field("kernel", nlohmann::json::value_t::number_integer).get<int>();
    const double us = field("measured_us", nlohmann::json::value_t::number_float).get<double>();
    const std::string role = field("role", nlohmann::json::value_t::string).get<std::string>();
    if (kernel < 0) continue;  // a launch the emitter made for no planned kernel (a copy of a view)
    auto k = byId.find(kernel);
    if (k == byId.end())
      throw MeasurementError(fmt::format("{}: launch {} ('{}'): kernel {} is not in this plan (measured from another "
                                         "diagram, sizes or version?)",
                                         path, i, launch, kernel));
    const std::string& name = k->second->kernel.name;
    if (role == "tile" && launch.compare(0, name.size(), name) != 0)
      throw MeasurementError(fmt::format("{}: launch {} ('{}') is kernel {} of the measured plan, which this plan names "
                                         "'{}' (measured from another diagram, sizes or version?)",
                                         path, i, launch, kernel, name));
    if (us < 0) throw MeasurementError(fmt::format("{}: launch {}: field 'measured_us' is negative", path, i));
    seconds[kernel] += us * 1e-6;
  }
  return seconds;
}

}  // namespace llmc
