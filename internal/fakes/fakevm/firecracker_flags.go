package fakevm

import (
	"fmt"
	"strconv"
)

// defaultAPISock is Firecracker's API socket path (inside the jail).
const defaultAPISock = "/run/firecracker.socket"

// firecrackerArgs are the command-line arguments of Firecracker
// (src/firecracker/src/main.rs). The fake acts on the API, id, config,
// metadata, logging and size-limit arguments; it accepts and ignores the
// others (seccomp, boot timer, PCI, start-time reports).
var firecrackerArgs = []argSpec{
	{name: "api-sock", value: true, def: defaultAPISock, help: "Path to unix domain socket used by the API."},
	{name: "id", value: true, def: defaultInstanceID, help: "MicroVM unique identifier."},
	{name: "seccomp-filter", value: true, help: "Optional parameter which allows specifying the path to a custom seccomp filter (ignored by the fake)."},
	{name: "no-seccomp", help: "Optional parameter which allows starting and using a microVM without seccomp filtering (the fake has none)."},
	{name: "start-time-us", value: true, help: "Process start time (wall clock, microseconds)."},
	{name: "start-time-cpu-us", value: true, help: "Process start CPU time (wall clock, microseconds)."},
	{name: "parent-cpu-time-us", value: true, help: "Parent process CPU time (wall clock, microseconds)."},
	{name: "config-file", value: true, help: "Path to a file that contains the microVM configuration in JSON format."},
	{name: "metadata", value: true, help: "Path to a file that contains metadata in JSON format to add to the mmds."},
	{name: "no-api", requires: "config-file", help: "Optional parameter which allows starting and using a microVM without an active API socket."},
	{name: "log-path", value: true, help: "Path to a fifo or a file used for configuring the logger on startup."},
	{name: "level", value: true, help: "Set the logger level."},
	{name: "module", value: true, help: "Set the logger module filter (ignored by the fake)."},
	{name: "show-level", help: "Whether or not to output the level in the logs."},
	{name: "show-log-origin", help: "Whether or not to include the file path and line number of the log's origin."},
	{name: "metrics-path", value: true, help: "Path to a fifo or a file used for configuring the metrics on startup."},
	{name: "boot-timer", help: "Whether or not to load boot timer device for logging elapsed time since InstanceStart command (ignored by the fake)."},
	{name: "snapshot-version", help: "Print the supported data format version."},
	{name: "describe-snapshot", value: true, help: "Print the data format version of the provided snapshot state file."},
	{name: "http-api-max-payload-size", value: true, def: strconv.Itoa(DefaultMMDSSizeLimit), help: "Http API request payload max size, in bytes."},
	{name: "mmds-size-limit", value: true, help: "Mmds data store limit, in bytes."},
	{name: "enable-pci", help: "Enables PCIe support (ignored by the fake)."},
}

// fcFlags are the parsed arguments the fake acts on.
type fcFlags struct {
	apiSock, id      string
	configFile       string
	metadata         string
	noAPI            bool
	logPath, level   string
	metricsPath      string
	payloadLimit     int
	mmdsSizeLimit    int
	help, version    bool
	snapshotVersion  bool
	describeSnapshot string
	startTimeUS      string
	startTimeCPUUS   string
	parentCPUTimeUS  string
}

// parseFirecrackerArgs parses Firecracker's command line (without the
// program name).
func parseFirecrackerArgs(args []string) (fcFlags, error) {
	p, err := parseArgs(firecrackerArgs, args)
	if err != nil {
		return fcFlags{}, err
	}
	f := fcFlags{
		apiSock: p.single["api-sock"], id: p.single["id"], configFile: p.single["config-file"],
		metadata: p.single["metadata"], noAPI: p.flags["no-api"], logPath: p.single["log-path"],
		level: p.single["level"], metricsPath: p.single["metrics-path"], help: p.help, version: p.version,
		snapshotVersion: p.flags["snapshot-version"], describeSnapshot: p.single["describe-snapshot"],
		startTimeUS: p.single["start-time-us"], startTimeCPUUS: p.single["start-time-cpu-us"],
		parentCPUTimeUS: p.single["parent-cpu-time-us"],
	}
	if f.help || f.version {
		return f, nil
	}
	for _, n := range []string{"start-time-us", "start-time-cpu-us", "parent-cpu-time-us"} {
		if v, ok := p.single[n]; ok {
			if _, err := strconv.ParseUint(v, 10, 64); err != nil {
				return fcFlags{}, &argErr{fmt.Sprintf("'%s' parameter expected to be of 'u64' type.", n)}
			}
		}
	}
	if f.payloadLimit, err = strconv.Atoi(p.single["http-api-max-payload-size"]); err != nil || f.payloadLimit <= 0 {
		return fcFlags{}, &argErr{"'http-api-max-payload-size' parameter expected to be of 'usize' type."}
	}
	f.mmdsSizeLimit = f.payloadLimit
	if v, ok := p.single["mmds-size-limit"]; ok {
		if f.mmdsSizeLimit, err = strconv.Atoi(v); err != nil || f.mmdsSizeLimit <= 0 {
			return fcFlags{}, &argErr{"'mmds-size-limit' parameter expected to be of 'usize' type."}
		}
	}
	if f.level != "" {
		if _, ok := parseLevel(f.level); !ok {
			return fcFlags{}, &argErr{fmt.Sprintf("Invalid value for logger level: %s.Possible values: [Error, Warning, Info, Debug]", f.level)}
		}
	}
	if err := validateInstanceID(f.id); err != nil {
		return fcFlags{}, &argErr{fmt.Sprintf("Invalid instance ID: %v", err)}
	}
	return f, nil
}
