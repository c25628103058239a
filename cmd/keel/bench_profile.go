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
// named. Every file is created when profiling starts, so a path that
// cannot be written fails the bench before it measures.
type benchProfiles struct {
	cpu, mutex, block, mem string
	files                  map[string]*os.File // by profile name, while profiling
}

// flags registers the profile flags on f; of says what is profiled.
func (p *benchProfiles) flags(f *pflag.FlagSet, of string) {
	f.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of "+of+" to this file")
	f.StringVar(&p.mutex, "mutexprofile", "", "write a mutex contention profile of "+of+" to this file")
	f.StringVar(&p.block, "blockprofile", "", "write a blocking profile of "+of+" to this file")
	f.StringVar(&p.mem, "memprofile", "", "write an allocation profile to this file (allocations since the process started, so the set-up's too; go tool pprof -sample_index=alloc_space)")
}

// start creates the named profiles' files and turns the profiles on.
func (p *benchProfiles) start() error {
	p.files = map[string]*os.File{}
	for name, path := range map[string]string{"cpu": p.cpu, "mutex": p.mutex, "block": p.block, "allocs": p.mem} {
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err != nil {
			p.closeFiles()
			return err
		}
		p.files[name] = f
	}
	if f := p.files["cpu"]; f != nil {
		if err := pprof.StartCPUProfile(f); err != nil {
			p.closeFiles()
			return err
		}
	}
	if p.files["mutex"] != nil {
		runtime.SetMutexProfileFraction(5)
	}
	if p.files["block"] != nil {
		runtime.SetBlockProfileRate(10_000) // one blocking event per 10 µs blocked
	}
	return nil
}

// stop writes the profiles and turns them off; it may be called again.
func (p *benchProfiles) stop() error {
	var errs []error
	if f := p.files["cpu"]; f != nil {
		pprof.StopCPUProfile()
	}
	if p.files["mutex"] != nil {
		runtime.SetMutexProfileFraction(0)
	}
	if p.files["block"] != nil {
		runtime.SetBlockProfileRate(0)
	}
	if p.files["allocs"] != nil {
		runtime.GC() // the profile is as of the last collection
	}
	for name, f := range p.files {
		if name == "cpu" {
			continue
		}
		if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
			errs = append(errs, fmt.Errorf("write the %s profile: %w", name, err))
		}
	}
	errs = append(errs, p.closeFiles())
	return errors.Join(errs...)
}

// closeFiles closes the profiles' files and forgets them.
func (p *benchProfiles) closeFiles() error {
	var errs []error
	for _, f := range p.files {
		errs = append(errs, f.Close())
	}
	p.files = nil
	return errors.Join(errs...)
}
