#import <Foundation/Foundation.h>

#include <stdlib.h>
#include <string.h>

#include "CConsumerGreeter.h"

@interface Greeter : NSObject {
    int greetings;
}
- (int)greet:(int)times;
- (NSString *)salutation;
@end

@implementation Greeter
- (int)greet:(int)times {
    greetings += times;
    return greetings;
}
- (NSString *)salutation { return @"hello"; }
@end

void *greeter_new(void) { return [Greeter new]; }

int greeter_greet(void *greeter, int times) { return [(Greeter *)greeter greet:times]; }

char *greeter_description(void *object) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    char *text = strdup([[(id)object description] UTF8String]);
    [pool release];
    return text;
}

char *greeter_salutation(void *greeter) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    char *text = strdup([[(Greeter *)greeter salutation] UTF8String]);
    [pool release];
    return text;
}

void greeter_release(void *object) { [(id)object release]; }
