"""Scripted games: every rule of RULES.md, per preset, with its exact result.

Each test deals fixed hands, plays fixed decisions (move strings, in turn
order) and compares the whole result (end, winner, scores, instant, den,
chops) with numbers worked out by hand from RULES §7 — the arithmetic is
written next to each expectation.  Preset figures used (RULES §9):

===============  =====  ===========  ==========  ======================
preset           cóng   two / quad   chop 2 / q  Sâm win / fail, instant
===============  =====  ===========  ==========  ======================
hoi_quan_bai     20     10 / 20      10 / 0      20 / 20, 20
s666pg           —      0 / 0        0 / 0       20 / 20, —
mien_bac         15     5 / 20       15 / 15     20 / 20, 20 (+penalties)
online           10     5 / 10       5 / 10      10 / 20 (to blocker), 10
===============  =====  ===========  ==========  ======================
"""

from __future__ import annotations

import pytest

from sam_env import core
from sam_env.game import Game, GameError
from sam_env.record import replay_report

HQB, S666, MB, ONL = "hoi_quan_bai", "s666pg", "mien_bac", "online"


def play(rules, hands: list[str], moves: str, opener: int = 0) -> Game:
    """Deal ``hands`` (space-separated cards) and apply ``moves`` in turn order."""
    g = Game.from_deal(rules, [h.split() for h in hands], opener)
    for m in moves.split():
        g.apply(m)
    return g


def ns(n: int) -> str:
    return "no_sam " * n


def result(g: Game) -> dict:
    """The game's result, after checking that its own record replays to it."""
    assert g.finished, f"the game is not over: seat {g.to_act} to act"
    res = g.result.to_json()
    assert replay_report(g.to_record()) == {"ok": True, "finished": True, "result": res}
    assert sum(res["scores"]) == 0
    return res


def won(winner: int, scores: list[int], den: int | None = None, chops: list | None = None) -> dict:
    return {"end": "won", "winner": winner, "scores": scores, "instant": None, "den": den,
            "chops": [{"from": f, "to": t, "amount": a} for f, t, a in (chops or [])]}


def scores_now(g: Game) -> list[int]:
    """Scores moved so far (chop chains settle at round end, before the game ends)."""
    return [int(x) for x in g.state[core.O_SCORE:core.O_SCORE + g.players]]


# ---- normal win, card counts, cóng, thối heo, thối tứ quý ----------------------------
NORMAL = ["3c 4c 5c 6c 7c 8c 9c Tc Jc Kd",
          "3d 4d 5d 6d 7d 9d Td Qd Ah 2s",
          "3h 4h 5s 6s 8s 9s Js Qs Ks 2d"]
NORMAL_MOVES = (ns(3) + "3 9 J K A 2 pass pass "  # seat 2 wins the round with its 2
                "3456 89TJ pass pass "           # seat 0 wins the next with 8-9-T-J
                "4567")                          # and leads its last four cards


@pytest.mark.parametrize("rules, scores", [
    (HQB, [22, -18, -4]),   # seat 1: 8 cards + one 2 × 10 = 18; seat 2: 4 cards
    (S666, [12, -8, -4]),   # no heo penalty: 8 and 4
    (MB, [17, -13, -4]),    # 8 + 5
    (ONL, [17, -13, -4]),   # 8 + 5
])
def test_normal_win_pays_card_counts(rules, scores):
    assert result(play(rules, NORMAL, NORMAL_MOVES)) == won(0, scores)


@pytest.mark.parametrize("rules, scores", [
    (HQB, [60, -30, -30]),  # cóng 20 + one 2 × 10, each
    (S666, [20, -10, -10]),  # no cóng at s666pg: a loser pays its 10 cards
    (MB, [40, -20, -20]),   # 15 + 5
    (ONL, [30, -15, -15]),  # 10 + 5
])
def test_cong_when_a_loser_played_no_card(rules, scores):
    g = play(rules, NORMAL, ns(3) + "3456789TJ pass pass K")
    assert result(g) == won(0, scores)


THOI = ["3c 4c 5c 6c 8c 9c Tc Jc Qc Kh",
        "2c 2d 2h 2s 7c 7d 7h 7s 3d 5d"]


@pytest.mark.parametrize("rules, scores", [
    # cóng 20 + four 2s × 10 + two quads (7777 and 2222) × 20 = 100
    ({"preset": HQB, "instant_wins": []}, [100, -100]),
    ({"preset": MB, "instant_wins": []}, [75, -75]),    # 15 + 4×5 + 2×20
    ({"preset": ONL, "instant_wins": []}, [50, -50]),   # 10 + 4×5 + 2×10
    (S666, [10, -10]),                                   # 10 cards, no penalties
])
def test_thoi_heo_and_thoi_tu_quy_count_a_quad_of_twos_both_ways(rules, scores):
    # four 2s are an instant win wherever four_twos is on, so those presets run without it
    g = play(rules, THOI, ns(2) + "3456 pass 89TJQ pass K")
    assert result(g) == won(0, scores)


def test_four_twos_left_would_have_been_an_instant_win():
    g = Game.from_deal(HQB, [h.split() for h in THOI])
    assert result(g)["instant"] == "four_twos" and g.result.winner == 1


# ---- chops ---------------------------------------------------------------------------------
CHOP = ["3c 3d 3h 3s 8c 9d Jc Qh Kc 2c",
        "4c 5d 6h 7s 9c Tc Jd Qc Ah 2d",
        "4d 5c 6c 7d 8d 9s Th Jh Kd As"]
CHOP_MOVES = ns(3) + "8 2 pass 3333 pass 2 pass pass JQK pass pass 9"


@pytest.mark.parametrize("rules, scores, chop", [
    # seat 1's 2 is chopped by 3333: seat 1 pays chop_two at the end of that round;
    # then seat 1 pays 9 cards, seat 2 cóng
    (HQB, [39, -19, -20], 10),    # 10 + 9 + 20
    (MB, [39, -24, -15], 15),     # 15 + 9 + 15
    (ONL, [24, -14, -10], 5),     # 5 + 9 + 10
    (S666, [19, -9, -10], 0),     # chop_two 0 settles nothing; 9 + 10 cards
])
def test_quad_chops_a_single_two_settled_at_round_end(rules, scores, chop):
    g = Game.from_deal(rules, [h.split() for h in CHOP])
    moves = CHOP_MOVES.split()
    for m in moves[:8]:  # … 3333 pass: seat 2 has no chop right, so the round ends
        g.apply(m)
    assert g.to_act == 0 and g.top is None
    assert scores_now(g) == [chop, -chop, 0]
    for m in moves[8:]:
        g.apply(m)
    assert result(g) == won(0, scores, chops=[(1, 0, chop)] if chop else [])


@pytest.mark.parametrize("rules, scores", [
    (HQB, [19, -19]),  # chop 10 + 9 cards
    (MB, [24, -24]),   # chop 15 + 9 cards
])
def test_chop_with_the_last_cards_is_settled_at_game_end(rules, scores):
    hands = ["3c 3d 3h 3s 5c 6d 7h 8s 9c Kd", "4c 5d 6h 7s 9d Tc Jd Qc Ah 2d"]
    g = play(rules, hands, ns(2) + "56789 pass K 2 3333")
    chop = scores[0] - 9
    assert result(g) == won(0, scores, chops=[(1, 0, chop)])


CHAIN = ["2c 3c 4d 6h 7c 8s Tc Jd Qd Ah",
         "5c 5d 5h 5s 3d 4c 6c 8c Jc Qc",
         "9c 9d 9h 9s 3h 4h 6d 7d Td 2d",
         "Kc Kd Kh Ks 3s 6s 7s 8d Ts Js"]
CHAIN_MOVES = (ns(4) + "2 5555 9999 KKKK pass pass pass "  # 2 chopped, then two quads chopped
               "678 pass pass pass 3 pass pass pass T pass pass pass J")


@pytest.mark.parametrize("rules, scores, chain", [
    # the last chopped (seat 2, 9999) pays the last chopper (seat 3) the whole chain
    # chop_two + 2 × chop_quad; seats 0 and 1, chopped earlier, pay no chop money.
    # Then seat 3 wins: seat 0 holds 9 cards, seat 1 six, seat 2 six + the 2d.
    (MB, [-9, -6, -56, 71], 45),   # chain 15 + 15 + 15; seat 2: 6 + 5; 45 + 9 + 6 + 11
    (ONL, [-9, -6, -36, 51], 25),  # chain 5 + 10 + 10; seat 2: 6 + 5; 25 + 26
    (HQB, [-9, -6, -26, 41], 10),  # chain 10 + 0 + 0; seat 2: 6 + 10; 10 + 31
    (S666, [-9, -6, -6, 21], 0),   # no chop money, no heo penalty
])
def test_chop_chain_last_chopped_pays_last_chopper(rules, scores, chain):
    g = Game.from_deal(rules, [h.split() for h in CHAIN])
    moves = CHAIN_MOVES.split()
    for m in moves[:11]:
        g.apply(m)
    assert g.to_act == 3 and g.top is None  # the round ended at the last chopper
    assert scores_now(g) == [0, 0, -chain, chain]
    for m in moves[11:]:
        g.apply(m)
    assert result(g) == won(3, scores, chops=[(2, 3, chain)] if chain else [])


PASSED = ["8c 3c 4d 6h 7c Tc Jd Qd Ah 3s",
          "2c 4c 6c 8s Jc Qc Kc 3d 7d Td",
          "9c 9d 9h 9s 3h 4h 6d 7s Ts Js",
          "5c 5d 5h 5s 4s 6s 8d Kd Qh 2d"]


def test_passed_seat_chops_back_into_the_round_hoi_quan_bai():
    g = play(HQB, PASSED, ns(4) + "8 2 pass 5555 pass pass")
    # seat 2 passed on the 2, but the top is now a quad played as a chop and it
    # holds a higher quad: it gets its turn back (passed_can_chop)
    assert g.to_act == 2 and sorted(g.legal_moves()) == ["9999", "pass"]
    g.apply("9999")
    g.apply("pass")  # seat 3; seats 0 and 1 passed and hold no quad: skipped
    assert g.to_act == 2 and g.top is None  # the chopper is back in, and leads
    # chain: the 2 (10) + 5555 (chop_quad 0); the last chopped, seat 3, pays seat 2
    assert scores_now(g) == [0, 0, 10, -10]
    assert g.result is None


@pytest.mark.parametrize("rules, chain", [(MB, 15), ({"preset": HQB, "passed_can_chop": False}, 10)])
def test_passed_seat_has_no_chop_right_when_off(rules, chain):
    g = play(rules, PASSED, ns(4) + "8 2 pass 5555 pass pass")
    # seat 2 stays out: the turn reaches seat 3, the last player, and the round ends
    assert g.to_act == 3 and g.top is None
    assert scores_now(g) == [0, -chain, 0, chain]  # the 2 of seat 1 was the last chopped


@pytest.mark.parametrize("rules, chain", [(MB, 15), (ONL, 10), (HQB, 0)])
def test_quad_over_a_led_quad_is_a_chop_worth_chop_quad(rules, chain):
    hands = ["5c 5d 5h 5s 3c 4d 7h 8s Jc Kd",
             "9c 9d 9h 9s 3d 4c 6h 8c Qc Ah",
             "3h 4h 6d 7s 8d Th Jh Qs Ks 2d"]
    g = play(rules, hands, ns(3) + "5555 9999 pass pass")
    assert g.to_act == 1 and g.top is None
    assert scores_now(g) == [-chain, chain, 0]  # the led quad's owner pays chop_quad


def test_double_quad_on_a_pair_of_twos_online():
    hands = ["2c 2d 3c 6h 7s 8c Tc Jd Qh Kc",
             "5c 5d 5h 5s 9c 9d 9h 9s 3d 4c",
             "4d 6d 7d 8d Td Jc Qd Kd Ad 2h"]
    g = play(ONL, hands, ns(3) + "22 55559999")
    assert g.legal_moves() == ["pass"]  # nothing beats a double quad
    for m in "pass pass 3 pass pass 4".split():
        g.apply(m)
    # chain: a pair of 2s chopped = 2 × chop_two = 10, seat 0 → seat 1 at round end;
    # then seat 0 holds 8 cards, seat 2 cóng 10 + its 2 × 5
    assert result(g) == won(1, [-18, 33, -15], chops=[(0, 1, 10)])
    with pytest.raises(GameError):
        play(HQB, hands, ns(3) + "22 55559999")  # no double quads at hoi_quan_bai
    with pytest.raises(GameError, match="pair of 2s"):
        play(ONL, hands, ns(3) + "3 55559999")


# ---- báo 1 --------------------------------------------------------------------------------
BAO = ["4d 6d 8d Td Qd Ad 2h 5h 7h Qs",
       "3s 4s 5s 6s 7s 8s 9s Ts Js Kd",
       "5c 6c 7c 8c 9c Tc Jc Qc 3c Ah",
       "4h 6h 8h Th Qh 2c 2s 7d 9d Jd"]
# seat 1 leads 3, then 4…J and has báo 1 (Kd left); seat 2 wins the round with
# 5…Q and leads its 3; seat 3 passes; seat 0 (tay trên of seat 1) must answer
BAO_MOVES = ns(4) + "3 pass pass pass 456789TJ 56789TJQ pass pass pass 3 pass"


@pytest.mark.parametrize("rules, scores", [
    # seat 0 plays a 5 (its highest is the 2h) and seat 1 wins on it with its last card:
    # seat 0 pays đền làng, Σ base of all losers.  Seat 0: 9 cards + its 2; seat 2: 1
    # card (Ah); seat 3: cóng + two 2s.
    (HQB, [-60, 60, 0, 0]),  # (9 + 10) + 1 + (20 + 20)
    (MB, [-40, 40, 0, 0]),   # (9 + 5) + 1 + (15 + 10)
    (ONL, [-35, 35, 0, 0]),  # (9 + 5) + 1 + (10 + 10)
])
def test_bao_mot_penalty_den_lang(rules, scores):
    g = play(rules, BAO, BAO_MOVES + " 5 K", opener=1)
    assert result(g) == won(1, scores, den=0)


def test_bao_mot_no_den_lang_when_tay_tren_did_not_play_the_single():
    g = play(HQB, BAO, BAO_MOVES + " pass K", opener=1)  # seat 1 wins on seat 2's 3
    # ordinary payments: seat 0 cóng 20 + 10, seat 2 one card, seat 3 cóng 20 + 20
    assert result(g) == won(1, [-30, 71, -1, -40])


def test_bao_mot_duty_also_binds_a_lead_and_a_pending_den_is_cleared():
    # seat 0 plays A (not its highest) on the 3; seat 1 cannot beat it and passes,
    # which clears that chance; seat 0 wins the round and LEADS a 4: seat 1 wins on it
    g = play(HQB, BAO, BAO_MOVES + " A pass pass 4 K", opener=1)
    # seat 0: 8 cards + its 2 = 18; seat 2: 1; seat 3: 40 → 59, all paid by seat 0
    assert result(g) == won(1, [-59, 59, 0, 0], den=0)


def test_bao_mot_enforced_is_a_legality_rule_s666pg():
    g = play(S666, BAO, BAO_MOVES, opener=1)
    assert g.to_act == 0 and g.legal_moves() == ["pass", "2"]  # only the highest single
    with pytest.raises(GameError, match="báo 1"):
        g.apply("5")
    g.apply("2")
    # seat 1 cannot beat a 2; the round goes on to seat 2 (Ah), which cannot either
    assert g.legal_moves() == ["pass"]


# ---- finishing with a 2, stuck leaders, draws ------------------------------------------
STUCK = ["4c 5c 6c 7c 8c 9c Tc Jc Qc 2d",
         "3s 5h 6d 7h 8d 9h Td Jh Qd 2h",
         "3c 3d 4d 4h Kc Kd Ks Ah Ac 2c"]


def test_stuck_leader_is_skipped_mien_bac():
    g = play(MB, STUCK, ns(3) + "456789TJQ pass pass")
    # seat 0 holds a lone 2 it may not finish with: seat 1 leads instead
    assert g.to_act == 1 and "pass" not in g.legal_moves()
    for m in "56789TJQ pass pass 3 pass".split():
        g.apply(m)
    assert g.legal_moves() == ["pass"]  # seat 0 may not finish with its 2 on the 3
    g.apply("pass")
    assert g.to_act == 2  # seat 1 is now stuck too (lone 2h)
    for m in "2 pass pass KKK pass pass AA pass pass 33 pass pass 44".split():
        g.apply(m)
    # seats 0 and 1 each hold one card, a 2: 1 + 5
    assert result(g) == won(2, [-6, -6, 12])


def test_finishing_with_a_two_is_allowed_at_hoi_quan_bai():
    g = play(HQB, STUCK, ns(3) + "456789TJQ pass pass 2")
    assert result(g) == won(0, [60, -30, -30])  # cóng 20 + a 2 × 10, each


def test_finishing_with_twos_forbidden_covers_pairs_not_low_straights():
    hands = ["2c 2d 3c 4h 5d 6s 7c 8h 9d Jc", "3d 4d 5c 6c 7d 8d 9c Tc Qs Kh"]
    g = play(S666, hands, ns(2) + "3456789 pass J pass")
    assert sorted(g.legal_moves()) == ["2"]  # "22" would empty the hand with 2s
    g = play(MB, ["As 2c 3s 4h 5d 6s 7c 8h 9d Jc", "3d 4d 5c 6c 7d 8d 9c Tc Qs Kh"],
             ns(2) + "456789 pass J pass")
    assert "A23" in g.legal_moves()  # a low 2 inside a straight may finish
    g.apply("A23")
    assert result(g) == won(0, [15, -15])  # cóng 15; seat 1 holds no 2


@pytest.mark.parametrize("rules, end, scores", [
    (ONL, "draw", [-5, 5]),   # the chop settled at its round end; a draw pays nothing more
    (MB, "draw", [-15, 15]),
    (HQB, "won", [1, -1]),    # seat 0 may finish with its 2: +11 (1 card + a 2) − 10 chop
])
def test_draw_when_no_seat_can_lead(rules, end, scores):
    hands = ["2c 2d 4c 5c 6c 7c 8c 9c Tc Jc", "3c 3d 3h 3s 2h 5d 6d 7d 8d 9d"]
    g = Game.from_deal(rules, [h.split() for h in hands])
    for m in (ns(2) + "2 3333 pass 56789 789TJ pass 456 pass").split():
        g.apply(m)
    if end == "won":
        g.apply("2")
    chop = -scores[0] if end == "draw" else 10
    assert result(g) == {"end": end, "winner": 0 if end == "won" else None, "scores": scores,
                         "instant": None, "den": None, "chops": [{"from": 0, "to": 1, "amount": chop}]}


# ---- Sâm -----------------------------------------------------------------------------------
SAM = ["3c 4d 5c 6d 7c 8d 9c Kc Kd Qd",
       "4s 5s 6h 7h 8h 9s Ts Jh Qs Qc",
       "Ah Ac As 2s 3h 4h 5h 9h Jc Js"]
SAM_MOVES = "sam KK pass pass 3456789 pass pass Q"


@pytest.mark.parametrize("rules, scores, den", [
    (HQB, [40, -20, -20], None),  # sam_win 20 from each
    (S666, [40, -20, -20], None),
    (MB, [40, -20, -20], None),
    # đền trắng: seat 2 passed on KK holding AA (first in time); seat 1 passed on
    # 3…9 holding 4…T later: seat 2 alone pays sam_win × 2
    (ONL, [20, 0, -20], 2),
])
def test_sam_success_and_den_trang(rules, scores, den):
    g = play(rules, SAM, SAM_MOVES)
    assert result(g) == {"end": "sam_success", "winner": 0, "scores": scores, "instant": None,
                         "den": den, "chops": []}


@pytest.mark.parametrize("rules, scores", [
    (HQB, [-40, 20, 20]),  # sam_fail 20 to each
    (ONL, [-40, 0, 40]),   # 20 × 2 to the blocker alone
])
def test_sam_failed(rules, scores):
    g = play(rules, SAM, "sam KK pass AA")
    assert result(g) == {"end": "sam_failed", "winner": 2, "scores": scores, "instant": None,
                         "den": None, "chops": []}


@pytest.mark.parametrize("rules, scores", [(MB, [-40, 20, 20]), (ONL, [-40, 40, 0])])
def test_chop_breaking_a_sam_pays_no_chop_money(rules, scores):
    hands = ["2c 3c 4d 5c 6d 7c 8d 9c Kc Kd",
             "Jc Jd Jh Js 4s 5s 6h 7h 8h 9s",
             "Ah Ac As 2s 3h 4h 5h 9h Qc Qs"]
    g = play(rules, hands, "sam 2 JJJJ")
    assert result(g) == {"end": "sam_failed", "winner": 1, "scores": scores, "instant": None,
                         "den": None, "chops": []}


def test_sam_declaration_is_asked_from_the_opener_and_the_declarer_leads():
    g = Game.from_deal(HQB, [h.split() for h in NORMAL], opener=1)
    assert g.phase == "sam" and g.to_act == 1
    g.apply("no_sam")
    assert g.to_act == 2
    g.apply("sam")  # seat 0 is never asked
    assert g.phase == "play" and g.to_act == 2 and g.declarer == 2
    g = play(HQB, NORMAL, ns(3), opener=1)
    assert g.phase == "play" and g.to_act == 1  # nobody declared: the opener leads


STUCK_SAM = ["3s 4s 5s 6s 7s 8s 9s Ts Qs 2d",
             "3c 4c 5h 6c 7c 8h 9c Tc Qc Kh",
             "3d 4d 5d 6d 7d 8d 9d Qd Kd Ac"]


@pytest.mark.parametrize("rules, end, winner, scores", [
    (S666, "sam_failed", 1, [-40, 20, 20]),
    (MB, "sam_failed", 1, [-40, 20, 20]),
    (ONL, "sam_failed", 1, [-40, 40, 0]),
])
def test_stuck_declarer_breaks_its_own_sam(rules, end, winner, scores):
    g = play(rules, STUCK_SAM, "sam 3456789T pass pass Q pass pass")
    assert g.to_act == 1 and "pass" not in g.legal_moves()  # the declarer is skipped
    g.apply("K")
    assert result(g) == {"end": end, "winner": winner, "scores": scores, "instant": None,
                         "den": None, "chops": []}


def test_declarer_may_finish_with_a_two_at_hoi_quan_bai():
    g = play(HQB, STUCK_SAM, "sam 3456789T pass pass Q pass pass 2")
    assert result(g)["end"] == "sam_success" and g.result.scores == (40, -20, -20)


def test_seed_004_worked_example():
    hands = ["3s 4s 5s 6s 7s 8s 9s Ts Js Qs",
             "2c 3c 4c 5c 6c 7c 8c 9c Tc Jc",
             "2d 3d 4d 5d 6d 7d 8d 9d Td Jd",
             "2h 3h 4h 5h 6h 7h 8h 9h Th Jh"]
    g = play(S666, hands, "sam 3456789TJQ")
    assert len(g.events) == 2
    assert result(g) == {"end": "sam_success", "winner": 0, "scores": [60, -20, -20, -20],
                         "instant": None, "den": None, "chops": []}
    # under hoi_quan_bai every hand is a 10-card straight (2…J with a low 2): opener 0 wins
    g = Game.from_deal(HQB, [h.split() for h in hands])
    assert result(g) == {"end": "instant_win", "winner": 0, "scores": [60, -20, -20, -20],
                         "instant": "dragon", "den": None, "chops": []}
    assert Game.from_deal(HQB, [h.split() for h in hands], opener=2).result.winner == 2


# ---- instant wins --------------------------------------------------------------------------
LOSERS = ["3h 5h 6h 7h 9h Kh Ah 3d Ts 7s",  # no pattern, no 2s, no quads
          "5d 6d 7d 8d 9d Jd Qd Kd 9s Ac"]


def instant(winner: int, pattern: str, scores: list[int]) -> dict:
    return {"end": "instant_win", "winner": winner, "scores": scores, "instant": pattern,
            "den": None, "chops": []}


@pytest.mark.parametrize("pattern, hand", [
    ("dragon", "3s 4s 5s 6s 7c 8c 9c Tc Jc Qh"),
    ("dragon", "As 2c 3s 4s 5s 6c 7c 8c 9c Th"),        # A low, 2 low
    ("four_twos", "2c 2d 2h 2s 4s 5s 8c Jc Qs Kc"),
    ("same_color", "4s 5s 6s 8s Jc Qc Tc Js 5c Qs"),     # all black (and only 3 pairs)
    ("three_triples", "4s 4c 4d 8s 8c 8h Jc Js Jh 5s"),
    ("five_pairs", "4s 4d 8s 8c Jc Js Qs Qc 5s 5c"),
    ("five_pairs", "4s 4c 4d 4h Jc Js Qs Qc 5s 5c"),     # a quad counts as two pairs
])
def test_each_instant_win_pattern(pattern, hand):
    hands = [LOSERS[0].split(), hand.split(), LOSERS[1].split()]
    # instant_win from each other seat (the losers hold no 2 and no quad, so
    # mien_bac's added penalties are 0)
    assert result(Game.from_deal(HQB, hands)) == instant(1, pattern, [-20, 40, -20])
    assert result(Game.from_deal(MB, hands)) == instant(1, pattern, [-20, 40, -20])
    assert result(Game.from_deal(ONL, hands)) == instant(1, pattern, [-10, 20, -10])
    assert Game.from_deal(S666, hands).phase == "sam"  # none at s666pg


def test_a_low_dragon_needs_ace_low_straights():
    hands = [LOSERS[0], "As 2c 3s 4s 5s 6c 7c 8c 9c Th", LOSERS[1]]
    g = Game.from_deal({"preset": HQB, "ace_low_straights": False}, [h.split() for h in hands])
    assert g.phase == "sam"


def test_instant_win_priority_and_tie_break_from_the_opener():
    five = "4s 4c 8s 8d Jc Js Qs Qc 5s 5c"
    twos = "2c 2d 2h 2s 3s 6d 7d 9h Th Kc"
    other5 = "3c 3d 6c 6h 7c 7h 9c 9d Tc Td"
    # seat 0 five pairs, seat 2 four 2s: four_twos outranks, whoever comes first
    g = Game.from_deal(HQB, [five.split(), "4d 5d 6s 8c Jd Qd Ks Ac Ad 3h".split(), twos.split()])
    assert result(g) == instant(2, "four_twos", [-20, -20, 40])
    # seats 0 and 2 both five pairs: the first from the opener wins
    hands = [five.split(), "4d 5d 6s 8c Jd Qd Ks Ac Ad 3h".split(), other5.split()]
    assert result(Game.from_deal(HQB, hands, opener=0)) == instant(0, "five_pairs", [40, -20, -20])
    assert result(Game.from_deal(HQB, hands, opener=1)) == instant(2, "five_pairs", [-20, -20, 40])
    assert result(Game.from_deal(HQB, hands, opener=2)) == instant(2, "five_pairs", [-20, -20, 40])


def test_poor_and_rich_hands_via_overrides():
    poor = "3c 4d 5h 6s 7c 8d 9h Ac 2d 3s"   # no T, J, Q, K
    rich = "Tc Td Jc Jd Qc Qd Kc Kd Ad 2c"   # no 3–9
    mid = "3d 5d 6h 7s 9c Th Qh Ks Ah 2h"
    rules = {"preset": ONL, "instant_wins": ["poor_hand"]}
    g = Game.from_deal(rules, [mid.split(), poor.split(), "4c 5c 6c 8s 9d Jh Qs Kh Ad 2s".split()])
    assert result(g) == instant(1, "poor_hand", [-10, 20, -10])
    rules = {"preset": ONL, "instant_wins": ["rich_hand"]}
    g = Game.from_deal(rules, [mid.split(), "4c 5c 6c 8s 9d Jh Qs Kh As 2s".split(), rich.split()])
    assert result(g) == instant(2, "rich_hand", [-10, -10, 20])
    rules = {"preset": ONL, "instant_wins": ["poor_hand", "rich_hand"]}
    # seat 1 poor, seat 2 rich: poor_hand comes first in the priority order, whatever the opener
    for opener in (0, 1, 2):
        g = Game.from_deal(rules, [mid.split(), poor.split(), rich.split()], opener)
        assert result(g) == instant(1, "poor_hand", [-10, 20, -10])


@pytest.mark.parametrize("rules, scores", [
    # seat 0 has a dragon; seat 1 holds KKKK and two 2s, seat 2 one 2
    (MB, [75, -50, -25]),   # 20 + 2×5 + 20; 20 + 5
    (HQB, [40, -20, -20]),  # no penalties added at hoi_quan_bai
    ({"preset": ONL, "instant_win_adds_penalties": True}, [45, -30, -15]),  # 10 + 10 + 10; 10 + 5
])
def test_instant_win_adds_penalties(rules, scores):
    hands = ["3c 4d 5h 6s 7c 8d 9h Ts Jc Qd",
             "Kc Kd Kh Ks 2c 2d 3s 5d 8c Ah",
             "3h 4c 6c 7s 9c Td Jh Qs Ac 2h"]
    assert result(Game.from_deal(rules, [h.split() for h in hands])) == instant(0, "dragon", scores)
