package proc

import (
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (my (odd) srv) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 3 0 100 0 0"
	got, err := ParseStat(stat)
	if err != nil || got != 1234+567 {
		t.Errorf("ParseStat = %d, %v; want 1801", got, err)
	}
	if _, err := ParseStat("4242 (short) S 1"); err == nil {
		t.Error("ParseStat of a short line succeeded")
	}
}

func TestParseStatus(t *testing.T) {
	m, err := ParseStatus(strings.NewReader("Name:\tunbound\nVmPeak:\t  99999 kB\nVmHWM:\t   23456 kB\nVmRSS:\t   22000 kB\nThreads:\t1\n"))
	if err != nil || m.RSS != 22000 || m.HWM != 23456 {
		t.Errorf("ParseStatus = %+v, %v", m, err)
	}
	if _, err := ParseStatus(strings.NewReader("Name:\tzombie\n")); err == nil {
		t.Error("ParseStatus without VmRSS succeeded")
	}
}

func TestParseUDPDrops(t *testing.T) {
	table := `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  123: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1111 2 0000000000000000 17
  124: 0100007F:1F90 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1112 2 0000000000000000 3
  125: 0100007F:1F91 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1113 2 0000000000000000 500
  126: 00000000:9F90 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1114 2 0000000000000000 900
`
	got, err := ParseUDPDrops(strings.NewReader(table), 8080) // 0x1F90
	if err != nil || got != 20 {
		t.Errorf("drops on 8080 = %d, %v; want 20", got, err)
	}
	if got, _ := ParseUDPDrops(strings.NewReader(table), 9999); got != 0 {
		t.Errorf("drops on an unused port = %d", got)
	}
}
