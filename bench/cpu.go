package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuSnapshot is the CPU time used so far by the orchestrator, the agents,
// their waited-for children (git; step shells), this process, and the
// whole machine.
type cpuSnapshot struct {
	orch, orchChildren     time.Duration
	agents, agentsChildren time.Duration
	self                   time.Duration
	postgres               time.Duration // every process named postgres
	machineBusy            time.Duration
	machineTotal           time.Duration
}

func snapshotCPU(orchPID int, agentPIDs []int) cpuSnapshot {
	var s cpuSnapshot
	s.orch, s.orchChildren = procCPU(orchPID)
	for _, pid := range agentPIDs {
		self, children := procCPU(pid)
		s.agents += self
		s.agentsChildren += children
	}
	s.self, _ = procCPU(os.Getpid())
	s.postgres = commCPU("postgres")
	s.machineBusy, s.machineTotal = machineCPU()
	return s
}

func (s cpuSnapshot) sub(o cpuSnapshot) cpuSnapshot {
	return cpuSnapshot{
		orch: s.orch - o.orch, orchChildren: s.orchChildren - o.orchChildren,
		agents: s.agents - o.agents, agentsChildren: s.agentsChildren - o.agentsChildren,
		self: s.self - o.self, postgres: s.postgres - o.postgres, machineBusy: s.machineBusy - o.machineBusy, machineTotal: s.machineTotal - o.machineTotal,
	}
}

// per describes the CPU time per unit ("job", "run") of n units.
func (s cpuSnapshot) per(n int, unit, engine string) string {
	each := func(d time.Duration) string { return fmt.Sprintf("%.2f", ms(d)/float64(n)) }
	busy := 0.0
	if s.machineTotal > 0 {
		busy = 100 * float64(s.machineBusy) / float64(s.machineTotal)
	}
	pg := ""
	if engine == enginePostgres {
		pg = ", PostgreSQL server " + each(s.postgres)
	}
	return fmt.Sprintf("CPU ms per %s: orchestrator %s + its git children %s, agents %s + their step processes %s, bench process %s%s; machine %.0f%% busy",
		unit, each(s.orch), each(s.orchChildren), each(s.agents), each(s.agentsChildren), each(s.self), pg, busy)
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// procCPU returns a process's own CPU time (utime+stime) and that of its
// children it has waited for (cutime+cstime).
func procCPU(pid int) (self, children time.Duration) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// Fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime is field 14, so f[11].
	if len(f) < 15 {
		return 0, 0
	}
	var v [4]int64
	for k := range v {
		fmt.Sscan(f[11+k], &v[k])
	}
	return time.Duration(v[0]+v[1]) * clockTick, time.Duration(v[2]+v[3]) * clockTick
}

// commCPU sums the CPU time of every process whose command name is comm:
// the PostgreSQL server's backends, which serve this benchmark (and
// whatever else uses the server at the time).
func commCPU(comm string) time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(data)) != comm {
			continue
		}
		self, _ := procCPU(pid)
		sum += self
	}
	return sum
}

// machineCPU returns the busy and total CPU time of all CPUs (/proc/stat).
func machineCPU() (busy, total time.Duration) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, 0
	}
	var sum, idle int64
	for k, s := range f[1:] {
		var n int64
		fmt.Sscan(s, &n)
		if k >= 8 { // guest times are already in user
			break
		}
		sum += n
		if k == 3 || k == 4 { // idle, iowait
			idle += n
		}
	}
	return time.Duration(sum-idle) * clockTick, time.Duration(sum) * clockTick
}

// neighbours returns the share (0 to 100) of the machine's CPU time that
// went to processes other than the ones measured (and, on PostgreSQL, the
// database server): other work sharing the machine, which slows a run.
func (s cpuSnapshot) neighbours(engine string) float64 {
	if s.machineTotal <= 0 {
		return 0
	}
	ours := s.orch + s.orchChildren + s.agents + s.agentsChildren + s.self
	if engine == enginePostgres {
		ours += s.postgres
	}
	if s.orch == s.self { // an in-process orchestrator
		ours -= s.self
	}
	return max(0, 100*float64(s.machineBusy-ours)/float64(s.machineTotal))
}
