#!/usr/bin/env bash
# A background lane of grid runs on a shared CPU: each line of QUEUE (read as the lane goes, so lines can be appended
# while it runs) is the argument list of one `adlnmt experiment` command, run at nice 19 in CHECKOUT, a separate
# clone of the repository (docs/experiments.md, "A long grid from a separate checkout"). While a command runs (every
# COMMIT_EVERY seconds, 600 by default: a line of many runs keeps what finished if the machine is lost) and after it,
# the lane commits in CHECKOUT every new result.json folder under experiments/results/*/runs/ (or one trained again with
# --rerun: its result.json records what it replaced), one commit a run (named by the lane that commits it: a lane
# commits what any lane in CHECKOUT finished), then each new
# speed.json of a run committed before (a speed: section's timings), then each new or replaced distillation archived
# under experiments/results/*/distilled/ (one commit each), and nothing else (reports are rebuilt in the checkout you
# publish from). With RETIME set to a pattern, a command whose line matches it and that finished a run
# is run again with --retime while every other `adlnmt experiment` process on the machine and its children are
# stopped (SIGSTOP, then SIGCONT), so that the decoding speeds a speed claim compares are taken alone; a line whose
# runs were finished before (a lane started again on its old queue) is not timed again. A line with --retime of its
# own (a seed's claim rows timed together once the last of them has finished) trains nothing: the lane commits its
# timings as a retiming, never as runs trained again (a rerun's result.json says "rerun" however often it is timed).
#
#   experiments/lane.sh NAME QUEUE [CHECKOUT]        e.g., two lanes on two cores:
#   RETIME=aan-table2 nohup experiments/lane.sh B queue-b.txt ../grid > lane-b.log 2>&1 &
#   nohup experiments/lane.sh A queue-a.txt ../grid > lane-a.log 2>&1 &
#   queue-a.txt:  experiments/adl-table3.yaml --scale cpu --seeds 2 --variants "RNMT" --jobs 1 --threads 1
#
# Two lanes must not run the same grid in one output folder (it is locked: the second command stops with an error);
# give the second its own --out and the same --results (docs/experiments.md).
# A line with --rerun trains its finished runs again each time it runs; once it has completed (exit 0, not stopped by a
# signal) the lane appends it to QUEUE.done and skips it when started again on the queue (a session's next lane); one
# stopped part-way would train its finished runs again, so a long line is better written with --rerun-before DATE.
# A --retime line goes there too once it has timed every run it selects, alone (its last line says so).
# PYTHON (default python3) runs adlnmt from CHECKOUT/src.
set -u
usage="usage: experiments/lane.sh NAME QUEUE [CHECKOUT]"
name=${1:?$usage} queue=$(realpath "${2:?$usage}") checkout=$(realpath "${3:-.}")
cd "$checkout" || exit 2
export PYTHONPATH=$checkout/src OMP_NUM_THREADS=1
python=${PYTHON:-python3}
lock=$(git rev-parse --absolute-git-dir)/lane.lock

commit_finished() {  # MESSAGE: one commit for each run folder whose result.json git does not track yet, then one
    # for each run's new speed.json (timed after its result was committed), said as "timed RUN"
    flock "$lock" sh -c '
        for f in $(git ls-files --others --exclude-standard -- "experiments/results/*/runs/*/seed-*/result.json"); do
            run=$(dirname "$f")
            git add -- "$run" && git commit -q -m "${run#experiments/results/}: $1" -- "$run" &&
                echo "committed ${run#experiments/results/}"
        done
        for f in $(git ls-files --modified -- "experiments/results/*/runs/*/seed-*/result.json"); do
            [ -f "$f" ] && grep -q "\"rerun\":" "$f" || continue  # a run trained again (--rerun) records what it replaced (one set aside: deleted)
            run=$(dirname "$f")
            git add -A -- "$run" && git commit -q -m "${run#experiments/results/}: trained again, $1" -- "$run" &&
                echo "committed ${run#experiments/results/} (trained again)"
        done
        for f in $(git ls-files --others --exclude-standard -- "experiments/results/*/runs/*/seed-*/speed.json"); do
            git add -- "$f" && git commit -q -m "$(dirname "${f#experiments/results/}"): speed timed" -- "$f" &&
                echo "timed $(dirname "${f#experiments/results/}")"
        done
        for f in $(git ls-files --others --modified --exclude-standard -- "experiments/results/*/distilled/*/record.json"); do
            folder=$(dirname "$f")
            git add -A -- "$folder" && git commit -q -m "${folder#experiments/results/}: distillation archived" -- "$folder" &&
                echo "archived ${folder#experiments/results/}"
        done' sh "$1"
}

commit_retiming() {  # MESSAGE: one commit of the results and speed records a --retime changed, if any; only files
    # that exist (a run folder set aside by hand, its files deleted, stays out of a retiming's commit)
    flock "$lock" sh -c '
        changed=$(for f in $(git ls-files --modified -- "experiments/results/*/runs/*/seed-*/result.json" \
                "experiments/results/*/runs/*/seed-*/speed.json"); do [ -f "$f" ] && echo "$f"; done)
        [ -z "$changed" ] || { git commit -q -m "$1" -- $changed && echo "committed the retiming"; }' sh "$1"
}

reran=$queue.done  # the --rerun and --retime lines this lane completed: not run again by a lane started again on the queue
commit_while_running() {  # MESSAGE FLAG: commit_finished every COMMIT_EVERY seconds while the file FLAG exists
    local waited=0 said
    while [ -e "$2" ]; do
        sleep 1
        waited=$((waited + 1))
        if [ $waited -ge "${COMMIT_EVERY:-600}" ]; then
            waited=0
            said=$(commit_finished "$1")
            [ -n "$said" ] && echo "$said" | tee -a "$2.said"
        fi
    done
}

line_number=0
while line=$(sed -n "$((line_number + 1))p" "$queue") && [ -n "$line" ]; do
    line_number=$((line_number + 1))
    rerun=; [[ " $line " == *" --rerun "* ]] && rerun=1
    if [[ -n "$rerun" || " $line " == *" --retime "* ]] && grep -qxF -e "$line" "$reran" 2>/dev/null; then
        echo "$(date -u +%FT%TZ) skipped: $line (completed before, $reran: delete the line there to run it again)"
        continue
    fi
    echo "$(date -u +%FT%TZ) start: $line"
    eval "set -- $line"
    if [[ " $line " == *" --retime "* ]]; then
        output=$(mktemp)
        PYTHONUNBUFFERED=1 nice -n 19 "$python" -m adlnmt experiment "$@" 2>&1 | tee "$output"
        status=${PIPESTATUS[0]}
        echo "$(date -u +%FT%TZ) exit $status: $line"
        commit_retiming "retimed (lane $name): $line"
        if [ $status = 0 ] && grep -qxF -e '--retime: every selected run timed again, alone' "$output"; then
            echo "$line" >> "$reran"  # every selected run timed: a lane started again does not time them again
        fi
        rm -f "$output"
        continue
    fi
    output=$(mktemp)
    message="finished on this machine (nice 19; committed by lane $name)"
    touch "$output.running"
    commit_while_running "$message" "$output.running" &
    PYTHONUNBUFFERED=1 nice -n 19 "$python" -m adlnmt experiment "$@" 2>&1 | tee "$output"
    status=${PIPESTATUS[0]}
    rm -f "$output.running"
    wait $!
    echo "$(date -u +%FT%TZ) exit $status: $line"
    if [ -n "$rerun" ] && [ $status = 0 ] && ! grep -q '^stopped by a signal' "$output"; then
        echo "$line" >> "$reran"  # its runs trained again: a second pass would train them a third time
    fi
    said=$(commit_finished "$message")
    [ -n "$said" ] && echo "$said"
    committed=$({ cat "$output.running.said" 2>/dev/null; echo "$said"; } | grep '^committed ')
    rm -f "$output" "$output.running.said"
    if [ $status = 0 ] && [ -n "$committed" ] && [ -n "${RETIME:-}" ] && [[ $line =~ $RETIME ]]; then
        others=$(pgrep -f "adlnmt experiment" | tr '\n' ' ')
        children=$(for pid in $others; do pgrep -P "$pid"; done | tr '\n' ' ')
        trap 'kill -CONT $others $children 2>/dev/null' EXIT
        kill -STOP $others $children 2>/dev/null
        "$python" -m adlnmt experiment "$@" --retime
        kill -CONT $others $children 2>/dev/null
        trap - EXIT
        commit_retiming "retimed with the other lanes stopped (lane $name): $line"
    fi
done
echo "$(date -u +%FT%TZ) queue done"
