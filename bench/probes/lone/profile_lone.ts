/**
 * The gateway's main thread at c=1, profiled (`--cpu-prof`), as `task bench` prints it at the end:
 *
 *   deno run -A bench/probes/lone/profile_lone.ts [--seconds S]
 */
import { profileGateway } from "../../profile_run.ts";
import { runStandalone } from "../../standalone.ts";

if (import.meta.main) {
  await runStandalone("profile-lone", { rounds: 1, seconds: 4 }, async (o) => {
    console.log(
      await profileGateway(`${o.dir}/prof`, o.mockUrl, o.serverCpu, [
        { concurrency: 1, seconds: o.seconds },
      ]),
    );
    return [];
  });
}
