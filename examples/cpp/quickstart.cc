// Four learners (threads) average two tensors' gradients with AdaComp. CMake:
// find_package(adacomp) and target_link_libraries(app PRIVATE adacomp::adacomp).
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "adacomp/communicator.h"
#include "adacomp/exchange.h"

int main() {
  const int p = 4;
  auto comms = adacomp::CreateInProcessGroup(p);  // one Communicator per learner
  std::vector<std::vector<float>> avg(p, std::vector<float>(1010, NAN));  // NaN: not written
  std::vector<adacomp::ExchangeResult> res(p);
  std::vector<std::thread> learners;
  for (int r = 0; r < p; ++r) {
    learners.emplace_back([&, r] {
      adacomp::CodecConfig ada;  // AdaComp, bin size 500, ternary values
      auto x = adacomp::GradientExchange::Create(*comms[r], {{"fc", 1000, ada}, {"bias", 10, ada}});
      std::mt19937 rng(r);
      std::normal_distribution<float> normal;
      std::vector<float> fc(1000), bias(10);
      for (float& g : fc) g = normal(rng);
      for (float& g : bias) g = normal(rng);
      std::vector<std::span<const float>> grads = {fc, bias};
      adacomp::Status s = x.ok() ? (*x)->Step(grads, 0.0, avg[r], &res[r]) : x.status();
      if (!s.ok()) std::printf("learner %d: %s\n", r, s.ToString().c_str());
    });
  }
  for (std::thread& t : learners) t.join();
  bool same = true;
  for (int r = 1; r < p; ++r) same = same && avg[r] == avg[0];
  if (same)
    std::printf("%d learners sent %d bytes instead of %d (float32)\n", p,
                int(res[0].wire_bytes[0] + res[0].wire_bytes[1]), 4 * 1010 * p);
  std::printf("every learner got the same averaged gradient: %s\n", same ? "yes" : "no");
  return same ? 0 : 1;
}
