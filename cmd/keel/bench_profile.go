package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/pflag"
)

// benchProfiles are the profiles a bench writes of its measured phase:
// CPU, mutex contention, blocking and allocations, each to its file when
// named.
type benchProfiles struct {
	cpu, mutex, block, mem string
	cpuFile                *os.File
}

// flags registers the profile flags on f; of says what is profiled.
func (p *benchProfiles) flags(f *pflag.FlagSet, of string) {
	f.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of "+of+" to this file")
	f.StringVar(&p.mutex, "mutexprofile", "", "write a mutex contention profile of "+of+" to this file")
	f.StringVar(&p.block, "blockprofile", "", "write a blocking profile of "+of+" to this file")
	f.StringVar(&p.mem, "memprofile", "", "write an allocation profile to this file (allocations since the process started, so the set-up's too; go tool pprof -sample_index=alloc_space)")
}

// start turns on the named profiles.
func (p *benchProfiles) start() error {
	if p.cpu != "" {
		f, err := os.Create(p.cpu)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		p.cpuFile = f
	}
	if p.mutex != "" {
		runtime.SetMutexProfileFraction(5)
	}
	if p.block != "" {
		runtime.SetBlockProfileRate(10_000) // one blocking event per 10 µs blocked
	}
	return nil
}

// stop writes the profiles and turns them off; it may be called again.
func (p *benchProfiles) stop() error {
	var errs []error
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		errs = append(errs, p.cpuFile.Close())
		p.cpuFile = nil
	}
	if p.mutex != "" {
		errs = append(errs, writeProfile("mutex", p.mutex))
		runtime.SetMutexProfileFraction(0)
	}
	if p.block != "" {
		errs = append(errs, writeProfile("block", p.block))
		runtime.SetBlockProfileRate(0)
	}
	if p.mem != "" {
		runtime.GC() // the profile is as of the last collection
		errs = append(errs, writeProfile("allocs", p.mem))
	}
	p.mutex, p.block, p.mem = "", "", ""
	return errors.Join(errs...)
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write the %s profile: %w", name, err)
	}
	return f.Close()
}
