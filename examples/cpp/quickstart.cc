#include <cmath>
#include <cstdio>
#include <span>
#include <thread>
#include <vector>

#include "adacomp/communicator.h"
#include "adacomp/exchange.h"

int main() {
  auto comms = adacomp::CreateInProcessGroup(4);  // one Communicator per learner
  std::vector<std::vector<float>> avg(4, std::vector<float>(1000));
  std::vector<adacomp::ExchangeResult> res(4);
  std::vector<std::thread> learners;
  for (int r = 0; r < 4; ++r)
    learners.emplace_back([&, r] {
      adacomp::CodecConfig ada;  // AdaComp, bin size 500, ternary values
      auto x = adacomp::GradientExchange::Create(*comms[r], {{"fc", 1000, ada}});
      std::vector<float> grad(1000);  // this learner's gradient
      for (int i = 0; i < 1000; ++i) grad[i] = std::sin(0.37f * i * (r + 1));
      std::vector<std::span<const float>> grads = {grad};
      if (!x.ok() || !x.value()->Step(grads, 0.0, avg[r], &res[r]).ok()) avg[r].clear();
    });
  for (std::thread& t : learners) t.join();
  bool same = !avg[0].empty() && avg[1] == avg[0] && avg[2] == avg[0] && avg[3] == avg[0];
  std::printf("%d bytes sent, not 16000; the same average everywhere: %s\n",
              int(res[0].wire_bytes[0]), same ? "yes" : "no");
  return same ? 0 : 1;
}
