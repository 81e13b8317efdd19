// chanbench's Go peer. P producer and P consumer goroutines pass ints
// through one channel until it is closed; prints nanoseconds per item. With
// -select K, the producers send round-robin over K channels and each consumer
// receives with one select over all K until every channel is closed.
// Run with GOMAXPROCS=2 beside Tessera's two workers.
package main

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"time"
)

func transfer(p, capacity, items int) float64 {
	ch := make(chan int, capacity)
	var producers, consumers sync.WaitGroup
	var mu sync.Mutex
	sum := 0
	start := time.Now()
	for k := 0; k < p; k++ {
		producers.Add(1)
		go func(k int) {
			defer producers.Done()
			for i := k; i < items; i += p {
				ch <- i
			}
		}(k)
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			s := 0
			for v := range ch {
				s += v
			}
			mu.Lock()
			sum += s
			mu.Unlock()
		}()
	}
	producers.Wait()
	close(ch)
	consumers.Wait()
	ns := float64(time.Since(start).Nanoseconds()) / float64(items)
	check(sum, items)
	return ns
}

// selectTransfer: the consumers' select over 2 or 8 channels is written out
// as Go code is (a reflect.Select would measure reflection instead).
func selectTransfer(p, k, capacity, items int) float64 {
	chs := make([]chan int, k)
	for i := range chs {
		chs[i] = make(chan int, capacity)
	}
	var producers, consumers sync.WaitGroup
	var mu sync.Mutex
	sum := 0
	start := time.Now()
	for w := 0; w < p; w++ {
		producers.Add(1)
		go func(w int) {
			defer producers.Done()
			for i := w; i < items; i += p {
				chs[i%k] <- i
			}
		}(w)
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			s := 0
			if k == 2 {
				s = select2(chs[0], chs[1])
			} else {
				s = select8(chs)
			}
			mu.Lock()
			sum += s
			mu.Unlock()
		}()
	}
	producers.Wait()
	for _, c := range chs {
		close(c)
	}
	consumers.Wait()
	ns := float64(time.Since(start).Nanoseconds()) / float64(items)
	check(sum, items)
	return ns
}

func select2(a, b chan int) int {
	s := 0
	for a != nil || b != nil {
		select {
		case v, ok := <-a:
			if !ok {
				a = nil
				continue
			}
			s += v
		case v, ok := <-b:
			if !ok {
				b = nil
				continue
			}
			s += v
		}
	}
	return s
}

func select8(c []chan int) int {
	c0, c1, c2, c3, c4, c5, c6, c7 := c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
	open := 8
	s := 0
	recv := func(v int, ok bool, ch *chan int) {
		if !ok {
			*ch = nil
			open--
			return
		}
		s += v
	}
	for open > 0 {
		select {
		case v, ok := <-c0:
			recv(v, ok, &c0)
		case v, ok := <-c1:
			recv(v, ok, &c1)
		case v, ok := <-c2:
			recv(v, ok, &c2)
		case v, ok := <-c3:
			recv(v, ok, &c3)
		case v, ok := <-c4:
			recv(v, ok, &c4)
		case v, ok := <-c5:
			recv(v, ok, &c5)
		case v, ok := <-c6:
			recv(v, ok, &c6)
		case v, ok := <-c7:
			recv(v, ok, &c7)
		}
	}
	return s
}

func check(sum, items int) {
	if sum != items*(items-1)/2 {
		fmt.Fprintf(os.Stderr, "chan: items lost or duplicated (sum %d)\n", sum)
		os.Exit(1)
	}
}


func main() {
	p := flag.Int("p", 1, "producers, and as many consumers")
	capacity := flag.Int("cap", 0, "channel capacity (0: unbuffered)")
	items := flag.Int("items", 200000, "items to pass")
	sel := flag.Int("select", 0, "channels the consumers select over (2 or 8; 0: one channel, no select)")
	flag.Parse()
	if *sel != 0 && *sel != 2 && *sel != 8 {
		fmt.Fprintln(os.Stderr, "chan: -select takes 2 or 8")
		os.Exit(2)
	}
	if *sel != 0 {
		fmt.Printf("%.3f\n", selectTransfer(*p, *sel, *capacity, *items))
		return
	}
	fmt.Printf("%.3f\n", transfer(*p, *capacity, *items))
}
