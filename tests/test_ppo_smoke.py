"""A CleanRL-style masked PPO (single file, GAE, clipped objective) trains on
``gymnasium.make_vec("SamLoc-v0", vectorization_mode="vector_entry_point")``.

A smoke test: a few thousand steps, one CPU thread.  It checks that the
batched env plugs into a standard loop without glue, that masked sampling
never picks an illegal action, and that an update changes the policy."""

from __future__ import annotations

import os

import gymnasium
import numpy as np
import pytest

torch = pytest.importorskip("torch")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sam_env.gym_env  # noqa: E402,F401  (registers SamLoc-v0)


class Agent(torch.nn.Module):
    def __init__(self, obs_size: int, num_actions: int, hidden: int = 64):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(obs_size, hidden), torch.nn.Tanh(),
                                        torch.nn.Linear(hidden, hidden), torch.nn.Tanh())
        self.pi = torch.nn.Linear(hidden, num_actions)
        self.v = torch.nn.Linear(hidden, 1)

    def value(self, x):
        return self.v(self.body(x)).squeeze(-1)

    def act(self, x, mask, action=None):
        h = self.body(x)
        logits = self.pi(h).masked_fill(mask == 0, -1e9)
        dist = torch.distributions.Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.v(h).squeeze(-1)


def test_masked_ppo_trains_on_make_vec():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    num_envs, num_steps, updates, epochs, minibatches = 8, 64, 4, 2, 4
    gamma, lam, clip, ent_coef, vf_coef = 0.99, 0.95, 0.2, 0.01, 0.5
    envs = gymnasium.make_vec("SamLoc-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                              rules="hoi_quan_bai", players=4, reward_scale=1 / 20)
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(envs)
    obs_size = envs.single_observation_space["observation"].shape[0]
    n_actions = envs.single_action_space.n
    agent = Agent(obs_size, n_actions)
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4, eps=1e-5)
    before = [p.detach().clone() for p in agent.parameters()]

    obs_buf = torch.zeros(num_steps, num_envs, obs_size)
    mask_buf = torch.zeros(num_steps, num_envs, n_actions, dtype=torch.int8)
    act_buf = torch.zeros(num_steps, num_envs, dtype=torch.long)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros(num_steps, num_envs) for _ in range(4))

    obs, info = envs.reset(seed=1)
    next_obs = torch.as_tensor(obs["observation"])
    next_mask = torch.as_tensor(obs["action_mask"])
    next_done = torch.zeros(num_envs)
    episodes = 0
    for _ in range(updates):
        for t in range(num_steps):
            obs_buf[t], mask_buf[t], done_buf[t] = next_obs, next_mask, next_done
            with torch.no_grad():
                action, logp, _, value = agent.act(next_obs, next_mask)
            assert next_mask.gather(1, action[:, None]).all()   # masked sampling picks legal actions
            act_buf[t], logp_buf[t], val_buf[t] = action, logp, value
            obs, reward, term, trunc, info = envs.step(action.numpy())
            assert not info["illegal_action"].any()
            rew_buf[t] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.as_tensor(obs["observation"])
            next_mask = torch.as_tensor(obs["action_mask"])
            next_done = torch.as_tensor(term | trunc, dtype=torch.float32)
            if "episode" in info:
                episodes += int(info["_episode"].sum())
        # GAE (same-step autoreset: a done step's value bootstrap is cut)
        with torch.no_grad():
            next_value = agent.value(next_obs)
            adv = torch.zeros_like(rew_buf)
            last = torch.zeros(num_envs)
            for t in reversed(range(num_steps)):
                nonterminal = 1.0 - (next_done if t == num_steps - 1 else done_buf[t + 1])
                nv = next_value if t == num_steps - 1 else val_buf[t + 1]
                delta = rew_buf[t] + gamma * nv * nonterminal - val_buf[t]
                last = delta + gamma * lam * nonterminal * last
                adv[t] = last
            ret = adv + val_buf
        b_obs, b_mask = obs_buf.reshape(-1, obs_size), mask_buf.reshape(-1, n_actions)
        b_act, b_logp, b_adv, b_ret = (act_buf.reshape(-1), logp_buf.reshape(-1), adv.reshape(-1),
                                       ret.reshape(-1))
        idx = np.arange(num_envs * num_steps)
        for _ in range(epochs):
            np.random.default_rng(0).shuffle(idx)
            for mb in np.array_split(idx, minibatches):
                _, logp, ent, v = agent.act(b_obs[mb], b_mask[mb], b_act[mb])
                ratio = (logp - b_logp[mb]).exp()
                a = (b_adv[mb] - b_adv[mb].mean()) / (b_adv[mb].std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - clip, 1 + clip)).mean()
                loss = pg + vf_coef * ((v - b_ret[mb]) ** 2).mean() - ent_coef * ent.mean()
                assert torch.isfinite(loss)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                opt.step()
    envs.close()
    assert episodes > 10     # games finished and were autoreset
    assert any(not torch.equal(p, q) for p, q in zip(before, agent.parameters()))
