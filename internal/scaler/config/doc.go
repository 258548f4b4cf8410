// Package config reads the auto-scaler's configuration: the main file
// (scalers.yaml, version 1) and the drop-in files of the scalers.d
// directory beside it, each of which contributes scalers only.
//
// Reading is strict. Every key is known or rejected with its path and the
// closest known key; every value is checked, including the rules that span
// fields (a container label set needs an image, a bare-metal one an
// absolute binaryPath, every label set carries the scaler's mandatory
// labels, no two scalers declare the same label set). All problems of all
// files are collected into one ErrorList, each entry positioned as
// FILE:LINE:COL, instead of stopping at the first.
//
// Entry points:
//
//   - Load reads a scalers.yaml and its scalers.d drop-ins from disk;
//     Parse does the same from bytes.
//   - (*File).ManagerConfig converts a loaded file into the scaler.Config
//     the scaler.Manager runs, with each label set's resources resolved
//     against defaults.resources.
//   - Plan compares two loaded files for a reload: which scalers are added,
//     removed, updated or unchanged, and which change type (a reload must
//     refuse those).
//   - ParseMemory reads a memory string such as "512m" or "1.5g".
//
// The package does no I/O besides Load's file reads and never starts
// anything: checks that need the host (does binaryPath exist, does the
// image pull) happen when a backend spawns. It may be imported by the
// orchestrator, the admin CLI and the scaler backends. A *File is plain
// data, not modified after Parse returns it, so it is safe to read from
// several goroutines; the functions keep no state between calls.
package config
